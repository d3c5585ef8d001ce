package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/manager"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testoperator"
)

// The in-cluster installation's webhook certificates: the operator, run with
// the flags and the ServiceAccount token of the rendered installation, issues
// them into its secret, injects the CA into the webhook configuration, serves
// the webhook with a certificate for its Service name, and issues new ones
// when the secret loses them. kwok runs no containers, so the test plays the
// kubelet's part: it copies the secret into the certificate directory, as the
// Deployment's secret volume does.
func TestInClusterWebhookCertificates(t *testing.T) {
	c := testcluster.Get(t)
	ctx := bg()
	ns := testcluster.UniqueName(t, "nmo")
	objs, err := config.OperatorObjects(config.OperatorOptions{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	var vwcName string
	for _, obj := range objs {
		switch o := obj.(type) {
		case *apiextensionsv1.CustomResourceDefinition:
			continue // installed for the package
		case *appsv1.Deployment:
			args = o.Spec.Template.Spec.Containers[0].Args
			continue // kwok would run it as a fake; the operator runs here
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			// The API server cannot reach the Service here: this copy must
			// never intercept the package's requests.
			vwcName = o.Name
			for i := range o.Webhooks {
				o.Webhooks[i].ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"never": "matches"}}
				o.Webhooks[i].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
			}
		}
		if err := c.Client.Create(ctx, obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
		}
		t.Cleanup(func() { _ = c.Client.Delete(bg(), obj) })
	}
	flag := func(name string) string {
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v
			}
		}
		t.Fatalf("the Deployment has no --%s flag: %v", name, args)
		return ""
	}
	secretKey := client.ObjectKey{Namespace: ns, Name: flag("webhook-secret-name")}
	dnsName := fmt.Sprintf("%s.%s.svc", flag("webhook-service-name"), ns)

	// The package operator steps aside: one operator reconciles at a time.
	operator.Stop()
	t.Cleanup(func() {
		if operator, err = testoperator.Start(c, defaultOptions()); err != nil {
			t.Errorf("restart the package operator: %v", err)
		}
	})

	tok, err := c.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, config.OperatorName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for the operator's ServiceAccount: %v", err)
	}
	saCfg := &rest.Config{Host: c.RESTConfig.Host, BearerToken: tok.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.RESTConfig.CAData, CAFile: c.RESTConfig.CAFile}}
	certDir := t.TempDir()
	webhookPort, err := testoperator.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	healthPort, err := testoperator.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	opts := defaultOptions()
	opts.Namespace = ns
	opts.LeaderElect = true
	opts.WebhookPort, opts.WebhookHost, opts.WebhookCertDir = webhookPort, "127.0.0.1", certDir
	opts.WebhookConfigName = flag("webhook-config-name")
	opts.WebhookServiceName = flag("webhook-service-name")
	opts.WebhookSecretName = flag("webhook-secret-name")
	opts.MetricsBindAddress, opts.HealthProbeBindAddress = "0", fmt.Sprintf("127.0.0.1:%d", healthPort)
	if opts.WebhookConfigName != vwcName {
		t.Fatalf("the Deployment manages webhook configuration %q, the installation has %q", opts.WebhookConfigName, vwcName)
	}

	runCtx, cancel := context.WithCancel(ctx)
	mgr, err := manager.New(runCtx, saCfg, opts)
	if err != nil {
		cancel()
		t.Fatalf("start the operator as its ServiceAccount: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	go mountSecret(runCtx, c, secretKey, certDir)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the operator ended with: %v", err)
		}
	})

	testcluster.WaitFor(t, 2*time.Minute, "the operator to report ready (certificates issued and served)", func(ctx context.Context) (bool, error) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort))
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("readyz: %s", resp.Status)
		}
		return true, nil
	})
	firstCA := checkServedCertificate(t, c, secretKey, vwcName, dnsName, webhookPort)
	checkLeader(t, c, ns)

	// Rotation: a secret that lost its certificates gets new ones, the CA is
	// injected again, and the server picks up the new certificate.
	secret := &corev1.Secret{}
	if err := c.Client.Get(ctx, secretKey, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data = nil
	if err := c.Client.Update(ctx, secret); err != nil {
		t.Fatalf("empty the certificate secret: %v", err)
	}
	testcluster.WaitFor(t, 2*time.Minute, "a new CA in the secret", func(ctx context.Context) (bool, error) {
		s := &corev1.Secret{}
		if err := c.Client.Get(ctx, secretKey, s); err != nil {
			return false, err
		}
		return len(s.Data["ca.crt"]) > 0 && !bytes.Equal(s.Data["ca.crt"], firstCA), nil
	})
	testcluster.WaitFor(t, 2*time.Minute, "the new certificate served and trusted through the webhook configuration", func(ctx context.Context) (bool, error) {
		err := serveCheck(ctx, c, secretKey, vwcName, dnsName, webhookPort)
		return err == nil, err
	})
}

// mountSecret plays the kubelet's secret volume: it copies the secret's keys
// into dir whenever they change.
func mountSecret(ctx context.Context, c *testcluster.Cluster, key client.ObjectKey, dir string) {
	written := map[string][]byte{}
	for ctx.Err() == nil {
		s := &corev1.Secret{}
		if err := c.Client.Get(ctx, key, s); err == nil {
			for name, data := range s.Data {
				if len(data) > 0 && !bytes.Equal(written[name], data) {
					tmp := filepath.Join(dir, "."+name)
					if os.WriteFile(tmp, data, 0o600) == nil && os.Rename(tmp, filepath.Join(dir, name)) == nil {
						written[name] = data
					}
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkServedCertificate checks the certificates once ready and returns the CA.
func checkServedCertificate(t *testing.T, c *testcluster.Cluster, key client.ObjectKey, vwcName, dnsName string, port int) []byte {
	t.Helper()
	testcluster.WaitFor(t, time.Minute, "the served certificate to match the secret and the injected CA", func(ctx context.Context) (bool, error) {
		err := serveCheck(ctx, c, key, vwcName, dnsName, port)
		return err == nil, err
	})
	s := &corev1.Secret{}
	if err := c.Client.Get(bg(), key, s); err != nil {
		t.Fatal(err)
	}
	return s.Data["ca.crt"]
}

// serveCheck: the secret holds a CA, a certificate and a key; the webhook
// configuration trusts that CA; the webhook serves a certificate for the
// Service's DNS name that this CA verifies, and answers an admission review.
func serveCheck(ctx context.Context, c *testcluster.Cluster, key client.ObjectKey, vwcName, dnsName string, port int) error {
	s := &corev1.Secret{}
	if err := c.Client.Get(ctx, key, s); err != nil {
		return err
	}
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if len(s.Data[k]) == 0 {
			return fmt.Errorf("secret %s has no %s yet", key, k)
		}
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: vwcName}, vwc); err != nil {
		return err
	}
	for _, wh := range vwc.Webhooks {
		if !bytes.Equal(wh.ClientConfig.CABundle, s.Data["ca.crt"]) {
			return fmt.Errorf("webhook %s does not trust the secret's CA yet", wh.Name)
		}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(vwc.Webhooks[0].ClientConfig.CABundle) {
		return fmt.Errorf("the injected CA bundle is not PEM")
	}
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "in-cluster-check", Operation: admissionv1.Create,
			Kind:     metav1.GroupVersionKind{Group: nmv1beta1.GroupVersion.Group, Version: nmv1beta1.GroupVersion.Version, Kind: "NodeMaintenance"},
			Resource: metav1.GroupVersionResource{Group: nmv1beta1.GroupVersion.Group, Version: nmv1beta1.GroupVersion.Version, Resource: "nodemaintenances"},
			Name:     "in-cluster-check",
			Object: runtime.RawExtension{Object: &nmv1beta1.NodeMaintenance{
				TypeMeta:   metav1.TypeMeta{APIVersion: nmv1beta1.GroupVersion.String(), Kind: "NodeMaintenance"},
				ObjectMeta: metav1.ObjectMeta{Name: "in-cluster-check"}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: "no-such-node"}}},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil,
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: dnsName, MinVersion: tls.VersionTLS12}}}
	url := fmt.Sprintf("https://127.0.0.1:%d%s", port, *vwc.Webhooks[0].ClientConfig.Service.Path)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("webhook at %s as %s: %w", url, dnsName, err)
	}
	defer resp.Body.Close()
	var got admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		return fmt.Errorf("webhook answer: %w", err)
	}
	if got.Response == nil || got.Response.Allowed || got.Response.Result == nil || !strings.Contains(got.Response.Result.Message, "does not exist") {
		return fmt.Errorf("the webhook did not refuse an unknown node: %+v", got.Response)
	}
	return nil
}

// checkLeader: the operator run with leader election holds its lease.
func checkLeader(t *testing.T, c *testcluster.Cluster, ns string) {
	t.Helper()
	testcluster.WaitFor(t, time.Minute, "the operator to hold its leader-election lease in "+ns, func(ctx context.Context) (bool, error) {
		leases := &coordinationv1.LeaseList{}
		if err := c.Client.List(ctx, leases, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, l := range leases.Items {
			if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
				return true, nil
			}
		}
		return false, fmt.Errorf("%d leases, none held", len(leases.Items))
	})
}
