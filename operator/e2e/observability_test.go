package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/ptr"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/operator/controller"
)

// A maintenance leaves events on the NodeMaintenance and on the Node, and the
// metrics endpoint reports phases, drain durations and evictions.
func TestEventsAndMetrics(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	c.CreateDeployment(t, ns, "obs", 2, pool.Selector())
	c.WaitRunningPods(t, ns, "obs", node, 2)
	pool.AddNode(t, "")

	name := testcluster.UniqueName(t, "observed")
	createMaintenance(t, c, name, node, "")
	waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)

	body := scrape(t, operator.MetricsURL)
	for _, want := range []string{
		`nodemaintenance_maintenances{phase="Succeeded"}`,
		`nodemaintenance_drain_duration_seconds_count`,
		`nodemaintenance_evictions_total{result="evicted"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics endpoint lacks %s", want)
		}
	}

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
