package provider_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testoperator"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/operator/controller"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/operator/manager"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/operator/webhook"
)

// The installation's RBAC is enough, and not more: the real operator runs
// with the installed ServiceAccount's own token (TokenRequest), serves the
// webhook the installation points at (webhook_url mode), and completes a whole
// maintenance; the same token cannot read secrets or delete pods.
func TestAccOperatorRunsAsItsServiceAccount(t *testing.T) {
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		stepAsideForInstallation(t, c)
		w := newLocalWebhook(t)
		ns := testcluster.UniqueName(t, "nmo-sa")
		cfg := providerBlock(c) + fmt.Sprintf(`
resource "nodemaintenance_operator" "this" {
  namespace         = %q
  replicas          = 0
  webhook_url       = "https://127.0.0.1:%d"
  webhook_ca_bundle = file(%q)
}
`, ns, w.port, w.caFile)

		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: providerFactories,
			Steps: []resource.TestStep{{
				Config: cfg,
				Check: func(*terraform.State) error {
					return maintenanceCycleAsServiceAccount(t, c, ns, w)
				},
			}},
		})
	})
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
func startAsServiceAccount(c *testcluster.Cluster, ns string, w localWebhook) (*rest.Config, func(), error) {
	ctx := context.Background()
	tok, err := c.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, config.OperatorName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("token for the operator's ServiceAccount: %w", err)
	}
	saCfg := &rest.Config{Host: c.RESTConfig.Host, BearerToken: tok.Status.Token, QPS: 100, Burst: 200,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.RESTConfig.CAData, CAFile: c.RESTConfig.CAFile}}

	runCtx, cancel := context.WithCancel(ctx)
	mgr, err := manager.New(runCtx, saCfg, manager.Options{
		Namespace: ns, LeaderElect: true,
		WebhookPort: w.port, WebhookHost: "127.0.0.1", WebhookCertDir: w.certDir,
		MetricsBindAddress: "0", HealthProbeBindAddress: "0",
		LeaseDuration: 6 * time.Second,
		Controller:    controller.Options{SkipNameValidation: true},
	})
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
