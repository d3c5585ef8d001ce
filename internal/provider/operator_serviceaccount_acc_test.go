package provider_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/controller"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/manager"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/webhook"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testoperator"
)

// The installation's RBAC is enough, and not more: the real operator runs
// with the installed ServiceAccount's own token (TokenRequest), serves the
// webhook the installation points at (webhook_url mode), and completes a whole
// maintenance; the same token cannot read secrets or delete pods (without
// allow_force_drain, the default, nothing grants that).
func TestAccOperatorRunsAsItsServiceAccount(t *testing.T) {
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		installForServiceAccount(t, c, "nmo-sa", "", func(ns string, w localWebhook) error {
			return maintenanceCycleAsServiceAccount(t, c, ns, w)
		})
	})
}

// installForServiceAccount installs the operator with nodemaintenance_operator
// (extra: more attributes) in webhook_url mode, with no replicas, in place of
// the package operator, then runs cycle (an operator run with the installed
// ServiceAccount's token) and checks every installed grant was used in it.
func installForServiceAccount(t *testing.T, c *testcluster.Cluster, prefix, extra string, cycle func(ns string, w localWebhook) error) {
	stepAsideForInstallation(t, c)
	w := newLocalWebhook(t)
	ns := testcluster.UniqueName(t, prefix)
	cfg := providerBlock(c) + fmt.Sprintf(`
resource "nodemaintenance_operator" "this" {
  namespace         = %q
  replicas          = 0
  webhook_url       = "https://127.0.0.1:%d"
  webhook_ca_bundle = file(%q)
%s}
`, ns, w.port, w.caFile, extra)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		Steps: []resource.TestStep{{
			Config: cfg,
			Check: func(*terraform.State) error {
				if err := cycle(ns, w); err != nil {
					return err
				}
				return everyGrantUsed(t, c, ns)
			},
		}},
	})
}

// allow_force_drain = true: the installation grants the deletion of pods and
// runs the operator with --allow-force-drain. The operator, run with the
// installed ServiceAccount's token and that flag, carries a drain whose
// timeout expires with onTimeout Force past a PodDisruptionBudget that never
// allows; every grant, the new one included, is used.
func TestAccOperatorForceDrainAsServiceAccount(t *testing.T) {
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		installForServiceAccount(t, c, "nmo-force", "  allow_force_drain = true\n", func(ns string, w localWebhook) error {
			dep := &appsv1.Deployment{}
			if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: config.OperatorName}, dep); err != nil {
				return err
			}
			if !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--allow-force-drain") {
				return fmt.Errorf("the Deployment does not run the operator with --allow-force-drain: %v", dep.Spec.Template.Spec.Containers[0].Args)
			}
			return forcedMaintenanceAsServiceAccount(t, c, ns, w)
		})
	})
}

func forcedMaintenanceAsServiceAccount(t *testing.T, c *testcluster.Cluster, ns string, w localWebhook) error {
	ctx := context.Background()
	_, stop, err := startAsServiceAccount(c, ns, w, func(o *manager.Options) { o.Controller.AllowForceDrain = true })
	if err != nil {
		return err
	}
	defer stop()
	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	podNS := c.Namespace(t)
	c.CreateDeployment(t, podNS, "held", 2, pool.Selector())
	c.CreatePDB(t, podNS, "held", ptr.To(intstr.FromInt32(2)), nil)
	c.WaitRunningPods(t, podNS, "held", node, 2)
	name := "force-" + node
	policy := &nmv1beta1.DrainPolicy{Timeout: &metav1.Duration{Duration: 2 * time.Second}, OnTimeout: nmv1beta1.DrainTimeoutForce}
	testcluster.WaitFor(t, time.Minute, "the ServiceAccount operator's webhook to admit", func(ctx context.Context) (bool, error) {
		err := c.Client.Create(ctx, &nmv1beta1.NodeMaintenance{ObjectMeta: metaName(name), Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node, Drain: policy}})
		return err == nil, err
	})
	testcluster.WaitFor(t, time.Minute, name+" Succeeded by force", func(ctx context.Context) (bool, error) {
		nm := &nmv1beta1.NodeMaintenance{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, nm); err != nil {
			return false, err
		}
		if nm.Status.Phase == nmv1beta1.MaintenanceSucceeded {
			return true, nil
		}
		return false, fmt.Errorf("status %+v", nm.Status)
	})
	if pods, err := c.PodsOnNode(ctx, node); err != nil || len(pods) != 0 {
		return fmt.Errorf("%d pods left on %s after the forced drain (%v)", len(pods), node, err)
	}
	if err := c.Client.Delete(ctx, &nmv1beta1.NodeMaintenance{ObjectMeta: metaName(name)}); err != nil {
		return err
	}
	testcluster.WaitFor(t, time.Minute, name+" gone", func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &nmv1beta1.NodeMaintenance{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	return nil
}

// stepAsideForInstallation stops the package operator and its local webhook
// configuration for a test that installs and runs its own operator, and brings
// both back (with the CRD that destroying the installation removed) after it.
func stepAsideForInstallation(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	operator.Stop()
	_ = c.Client.Delete(context.Background(), &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metaName("node-maintenance-operator-local")})
	t.Cleanup(func() {
		if err := c.InstallCRD(context.Background()); err != nil {
			t.Errorf("reinstall the CRD: %v", err)
		}
		var err error
		if operator, err = testoperator.Start(c, testoperator.DefaultOptions()); err != nil {
			t.Errorf("restart the package operator: %v", err)
		}
	})
}

// localWebhook is what an installation in webhook_url mode needs from the
// operator that runs outside the cluster: a port and a certificate for
// 127.0.0.1 whose CA the webhook configuration trusts.
type localWebhook struct {
	port    int
	certDir string
	caFile  string
}

func newLocalWebhook(t *testing.T) localWebhook {
	t.Helper()
	w := localWebhook{certDir: t.TempDir()}
	caPEM, err := webhook.WriteSelfSignedCerts(w.certDir, []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	w.caFile = filepath.Join(w.certDir, "ca.crt")
	if err := os.WriteFile(w.caFile, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if w.port, err = testoperator.FreePort(); err != nil {
		t.Fatal(err)
	}
	return w
}

// startAsServiceAccount runs the real operator, as the binary builds it, with
// a TokenRequest token of the ServiceAccount the installation in ns created:
// nothing it does may need more than the installed RBAC. It returns the
// ServiceAccount's client config and a stop function.
func startAsServiceAccount(c *testcluster.Cluster, ns string, w localWebhook, opts ...func(*manager.Options)) (*rest.Config, func(), error) {
	ctx := context.Background()
	tok, err := c.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, config.OperatorName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("token for the operator's ServiceAccount: %w", err)
	}
	saCfg := &rest.Config{Host: c.RESTConfig.Host, BearerToken: tok.Status.Token, QPS: 100, Burst: 200,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.RESTConfig.CAData, CAFile: c.RESTConfig.CAFile}}

	runCtx, cancel := context.WithCancel(ctx)
	o := manager.Options{
		Namespace: ns, LeaderElect: true,
		WebhookPort: w.port, WebhookHost: "127.0.0.1", WebhookCertDir: w.certDir,
		MetricsBindAddress: "0", HealthProbeBindAddress: "0",
		LeaseDuration: 6 * time.Second,
		Controller:    controller.Options{SkipNameValidation: true},
	}
	for _, opt := range opts {
		opt(&o)
	}
	mgr, err := manager.New(runCtx, saCfg, o)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("start the operator as its ServiceAccount: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	return saCfg, func() { cancel(); <-done }, nil
}

func maintenanceCycleAsServiceAccount(t *testing.T, c *testcluster.Cluster, ns string, w localWebhook) error {
	ctx := context.Background()
	saCfg, stop, err := startAsServiceAccount(c, ns, w)
	if err != nil {
		return err
	}
	defer stop()

	// A whole maintenance, the webhook included, driven by that operator.
	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	podNS := c.Namespace(t)
	c.CreateDeployment(t, podNS, "sa", 2, pool.Selector())
	c.WaitRunningPods(t, podNS, "sa", node, 2)
	pool.AddNode(t, "")
	name := "sa-" + node
	testcluster.WaitFor(t, time.Minute, "the ServiceAccount operator's webhook to admit", func(ctx context.Context) (bool, error) {
		err := c.Client.Create(ctx, &nmv1beta1.NodeMaintenance{ObjectMeta: metaName(name), Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node}})
		return err == nil, err
	})
	testcluster.WaitFor(t, time.Minute, name+" Succeeded", func(ctx context.Context) (bool, error) {
		nm := &nmv1beta1.NodeMaintenance{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, nm); err != nil {
			return false, err
		}
		if nm.Status.Phase == nmv1beta1.MaintenanceSucceeded && nm.Status.EvictionPods == 2 {
			return true, nil
		}
		return false, fmt.Errorf("status %+v", nm.Status)
	})
	bad := &nmv1beta1.NodeMaintenance{ObjectMeta: metaName("sa-bad"), Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: "no-such-node"}}
	if err := c.Client.Create(ctx, bad); err == nil || !strings.Contains(err.Error(), "does not exist") {
		return fmt.Errorf("the webhook run as the ServiceAccount did not refuse an unknown node: %v", err)
	}
	if err := c.Client.Delete(ctx, &nmv1beta1.NodeMaintenance{ObjectMeta: metaName(name)}); err != nil {
		return err
	}
	testcluster.WaitFor(t, time.Minute, name+" gone and its node restored", func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &nmv1beta1.NodeMaintenance{})
		if !apierrors.IsNotFound(err) {
			return false, err
		}
		n := &corev1.Node{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return false, err
		}
		return !n.Spec.Unschedulable, nil
	})

	// Not over-broad: no secrets outside its namespace, no pod deletion.
	sa, err := client.New(saCfg, client.Options{})
	if err != nil {
		return err
	}
	if err := sa.List(ctx, &corev1.SecretList{}, client.InNamespace("kube-system")); !apierrors.IsForbidden(err) {
		return fmt.Errorf("the operator's ServiceAccount can list secrets in kube-system (err %v); it must not", err)
	}
	pods, err := c.PodsOnNode(ctx, node)
	if err == nil && len(pods) > 0 {
		if err := sa.Delete(ctx, &pods[0]); !apierrors.IsForbidden(err) {
			return fmt.Errorf("the operator's ServiceAccount can delete pods (err %v); it must only evict", err)
		}
	}
	if err := sa.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: podNS, Name: "any"}}); !apierrors.IsForbidden(err) {
		return fmt.Errorf("the operator's ServiceAccount may delete pods (err %v); it must only evict", err)
	}
	return nil
}

// everyGrantUsed reads the API server's audit log of the ServiceAccount
// cycle: every verb on every resource that the installation's ClusterRole and
// Roles grant was used (and allowed) in it, except the grants
// notUsedInThisCycle explains. A grant that nothing uses is a permission too
// many.
func everyGrantUsed(t *testing.T, c *testcluster.Cluster, ns string) error {
	ctx := context.Background()
	user := "system:serviceaccount:" + ns + ":" + config.OperatorName
	var used map[string]bool
	// The log records a watch when it ends, which the operator's stop made
	// happen just now.
	testcluster.WaitFor(t, 30*time.Second, "the audit log of the operator's watches", func(ctx context.Context) (bool, error) {
		events, err := c.AuditEvents(ctx)
		if err != nil {
			return false, err
		}
		used = map[string]bool{}
		for _, e := range events {
			// Allowed is all that counts: a create that finds the object
			// there already (409) used its grant.
			allowed := e.ResponseStatus.Code != http.StatusForbidden && e.ResponseStatus.Code != http.StatusUnauthorized
			if e.User.Username == user && allowed && e.ObjectRef.Resource != "" {
				used[grantKey(e.ObjectRef.APIGroup, e.ObjectRef.Resource, e.ObjectRef.Subresource, e.Verb)] = true
			}
		}
		return used[grantKey("", "nodes", "", "watch")], nil
	})

	var rules []rbacv1.PolicyRule
	cr := &rbacv1.ClusterRole{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: config.OperatorName}, cr); err != nil {
		return err
	}
	rules = append(rules, cr.Rules...)
	roles := &rbacv1.RoleList{}
	if err := c.Client.List(ctx, roles, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, r := range roles.Items {
		rules = append(rules, r.Rules...)
	}
	var unused []string
	seen := map[string]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				resource, sub, _ := strings.Cut(res, "/")
				for _, v := range r.Verbs {
					k := grantKey(g, resource, sub, v)
					if used[k] || seen[k] {
						continue
					}
					seen[k] = true
					if why := notUsedInThisCycle(k, used); why != "" {
						t.Logf("granted, not used here: %s (%s)", k, why)
						continue
					}
					unused = append(unused, k)
				}
			}
		}
	}
	if len(unused) > 0 {
		return fmt.Errorf("the installation grants the operator %v, which a whole maintenance never used: remove them from the RBAC markers, or say in notUsedInThisCycle what needs them", unused)
	}
	return nil
}

// notUsedInThisCycle says why a grant is needed although the ServiceAccount
// cycle does not use it, or "" when nothing does.
func notUsedInThisCycle(grant string, used map[string]bool) string {
	verb, resource, _ := strings.Cut(grant, " ")
	switch {
	case verb == "list" && used["watch "+resource]:
		return "an informer lists first on API servers that do not stream a watch's initial list"
	case resource == "core/secrets" || resource == "admissionregistration.k8s.io/validatingwebhookconfigurations":
		return "in-cluster webhook certificates: the operator issues them into its secret and injects the CA; this cycle uses webhook_url"
	case verb == "patch" && (resource == "core/events" || resource == "events.k8s.io/events"):
		return "an event repeated within minutes is patched into the earlier one"
	case grant == "get core/nodes":
		return "a node is read live only when the cache does not have it yet (the webhook, for a node that joined moments ago) or after a write to it lost a race (the lifecycle conditions, the restore): a cycle whose writes win reads the nodes from the cache"
	case grant == "create core/namespaces":
		return "the namespace of the node leases and the admission ledger is created only when the API server says it is missing (the first lease or admission of a cluster): a cycle on a cluster that has it already does not use it"
	case resource == "batch/jobs" || strings.HasPrefix(resource, "nodemaintenance.io/nodemaintenancerollouts") ||
		(resource == "nodemaintenance.medik8s.io/nodemaintenances" && (verb == "create" || verb == "delete")):
		return "the NodeMaintenanceRollout controller: its children and step Jobs; this cycle runs no rollout (operator/e2e TestRollout* do)"
	case verb == "get" && (resource == "apps/deployments" || resource == "apps/replicasets" || resource == "apps/statefulsets"):
		return "a rollout's recovery gate reads the workloads evicted from a restored node; this cycle runs no rollout (operator/e2e TestRolloutRecovery* do)"
	case verb == "create" && (resource == "authentication.k8s.io/tokenreviews" || resource == "authorization.k8s.io/subjectaccessreviews"):
		return "--metrics-secure: the metrics endpoint checks each scraper's token and its right to get /metrics; this cycle does not scrape (operator/e2e TestSecureMetrics does)"
	}
	return ""
}

func grantKey(group, resource, sub, verb string) string {
	if group == "" {
		group = "core"
	}
	if sub != "" {
		resource += "/" + sub
	}
	return verb + " " + group + "/" + resource
}
