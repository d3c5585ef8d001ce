package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/controller"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// A maintenance leaves events on the NodeMaintenance and on the Node, and the
// metrics endpoint reports phases, drain durations and evictions.
func TestEventsAndMetrics(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	node := deploymentNode(t, c, ns, "obs", 2, nil, nil)

	name := testcluster.UniqueName(t, "observed")
	createMaintenance(t, c, name, node, "")
	waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)

	body := scrape(t, operator.MetricsURL)
	for _, want := range []string{
		`nodemaintenance_maintenances{phase="Succeeded"}`,
		`nodemaintenance_drain_duration_seconds_count`,
		`nodemaintenance_evictions_total{result="evicted"}`,
		`nodemaintenance_webhook_admissions_total{kind="NodeMaintenance",operation="CREATE",result="admitted"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics endpoint lacks %s", want)
		}
	}
	// The per-object gauges (deploy/monitoring's alerts) follow only the
	// Running maintenances: a Succeeded one has none, once the operator's
	// cache has its own write of the phase.
	gone := fmt.Sprintf(`nodemaintenance_maintenance_running_since_timestamp_seconds{name=%q`, name)
	testcluster.WaitFor(t, 15*time.Second, "the running gauge of a Succeeded maintenance to go", func(context.Context) (bool, error) {
		if strings.Contains(scrape(t, operator.MetricsURL), gone) {
			return false, fmt.Errorf("the metrics endpoint still reports %s", gone)
		}
		return true, nil
	})

	deleteMaintenance(t, c, name)
	wantReasons := map[string]string{
		controller.ReasonBeginMaintenance:     "NodeMaintenance/" + name,
		controller.ReasonSucceededMaintenance: "NodeMaintenance/" + name,
		controller.ReasonRemovedMaintenance:   "NodeMaintenance/" + name,
		controller.ReasonCordon:               "Node/" + node,
		controller.ReasonUncordon:             "Node/" + node,
	}
	testcluster.WaitFor(t, 30*time.Second, "maintenance events", func(ctx context.Context) (bool, error) {
		list := &eventsv1.EventList{}
		if err := c.Client.List(ctx, list); err != nil {
			return false, err
		}
		seen := map[string]bool{}
		for _, e := range list.Items {
			seen[e.Reason+" "+e.Regarding.Kind+"/"+e.Regarding.Name] = true
		}
		for reason, obj := range wantReasons {
			if !seen[reason+" "+obj] {
				return false, fmt.Errorf("no %s event on %s", reason, obj)
			}
		}
		return true, nil
	})
}

// The lease is renewed on a timer while the node stays in maintenance, not
// only when something else makes the operator reconcile.
func TestLeaseRenewedWhileInMaintenance(t *testing.T) {
	c := testcluster.Get(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	name := testcluster.UniqueName(t, "renew")
	createMaintenance(t, c, name, node, "")
	waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
	first, err := getLease(c, node)
	if err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 4*defaultOptions().LeaseDuration/3, "the lease to be renewed", func(ctx context.Context) (bool, error) {
		l, err := getLease(c, node)
		if err != nil {
			return false, err
		}
		return l.Spec.RenewTime.After(first.Spec.RenewTime.Time), nil
	})
	if l, _ := getLease(c, node); ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != int32(defaultOptions().LeaseDuration.Seconds()) {
		t.Errorf("lease duration %v", l.Spec.LeaseDurationSeconds)
	}
}

// Pods that tolerate the maintenance taints come back onto the node when
// their controller replaces them. The rule: a pod that was there when the
// maintenance began is evicted once; a replacement created after the cordon
// that tolerates the taints chose the node in maintenance and stays. The drain
// must end instead of evicting them forever.
func TestTolerantPodsDoNotDrainForever(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	c.CreateDeployment(t, ns, "tolerant", 3, pool.Selector(), testcluster.WithTolerateAll())
	c.CreateDeployment(t, ns, "normal", 2, pool.Selector())
	c.WaitRunningPods(t, ns, "tolerant", node, 3)
	c.WaitRunningPods(t, ns, "normal", node, 2)
	// No spare node: the tolerant replacements can only land back on the
	// cordoned node, the normal ones stay Pending.

	name := testcluster.UniqueName(t, "tolerant")
	createMaintenance(t, c, name, node, "")
	nm := waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
	if nm.Status.EvictionPods != 5 {
		t.Errorf("evictionPods=%d, want 5 (every pod there at the start)", nm.Status.EvictionPods)
	}
	c.WaitRunningPods(t, ns, "tolerant", node, 3)
	pods, err := c.PodsOnNode(bg(), node)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		// Timestamps have one-second resolution: a replacement made in the
		// NodeMaintenance's second has the same one.
		if p.Labels["app"] != "tolerant" || p.CreationTimestamp.Before(&nm.CreationTimestamp) {
			t.Errorf("pod %s/%s on the drained node is neither a tolerant replacement nor new", p.Namespace, p.Name)
		}
	}
	// Still Succeeded a moment later: the replacements are not evicted.
	time.Sleep(2 * time.Second)
	if got := getMaintenance(t, c, name); got.Status.Phase != nmv1beta1.MaintenanceSucceeded {
		t.Errorf("phase went back to %s", got.Status.Phase)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// The operator's log, at debug level, through a whole maintenance, a request
// its webhook refuses and a restore, holds none of its credentials: not the
// client key of its kubeconfig, not the webhook's private key.
func TestOperatorLogCarriesNoSecret(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	node := deploymentNode(t, c, ns, "quiet", 2, nil, nil)
	p := runOperatorProcess(t, c, "--zap-log-level=debug")

	name := testcluster.UniqueName(t, "logged")
	createMaintenance(t, c, name, node, "")
	waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
	bad := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: testcluster.UniqueName(t, "refused")}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: "no-such-node"}}
	if err := c.Client.Create(bg(), bad); err == nil {
		t.Fatal("the webhook admitted a maintenance of a node that does not exist")
	}
	deleteMaintenance(t, c, name)

	keys := map[string][]byte{"the kubeconfig's client key": c.RESTConfig.KeyData}
	if c.RESTConfig.KeyFile != "" {
		keys["the kubeconfig's client key"] = readFile(t, c.RESTConfig.KeyFile)
	}
	webhookKeys, _ := filepath.Glob(filepath.Join(p.Dir, "certs", "*.key"))
	if len(webhookKeys) == 0 {
		t.Fatalf("no webhook key in %s: the test does not know where the operator keeps it", filepath.Join(p.Dir, "certs"))
	}
	for _, f := range webhookKeys {
		keys["webhook key "+filepath.Base(f)] = readFile(t, f)
	}
	log := string(readFile(t, p.LogPath))
	if !strings.Contains(log, `"level":"debug"`) && !strings.Contains(log, "DEBUG") {
		t.Fatalf("the operator log %s has no debug line: the test does not see what it logs", p.LogPath)
	}
	if strings.Contains(log, "PRIVATE KEY") {
		t.Errorf("the operator log %s contains a PEM private key", p.LogPath)
	}
	for what, pemData := range keys {
		for _, line := range strings.Split(string(pemData), "\n") {
			if len(line) >= 32 && !strings.HasPrefix(line, "-----") && strings.Contains(log, line) {
				t.Errorf("%s appears in the operator log %s", what, p.LogPath)
				break
			}
		}
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
