package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// With --metrics-secure, as installed, the metrics endpoint speaks HTTPS and
// HTTP/1.1 only, and serves a scraper whose token is bound to the
// installation's metrics-reader ClusterRole; it refuses anonymous scrapers
// (401) and tokens without that role (403).
func TestSecureMetrics(t *testing.T) {
	c := testcluster.Get(t)
	o := defaultOptions()
	o.MetricsSecure = true
	restartOperator(t, c, o)
	url := strings.Replace(operator.MetricsURL, "http://", "https://", 1)

	reader := installationMetricsReader(t)
	reader.Name = testcluster.UniqueName(t, "metrics-reader")
	ns := c.Namespace(t)
	readerToken := serviceAccountToken(t, c, ns, "reader")
	strangerToken := serviceAccountToken(t, c, ns, "stranger")
	createCleanedUp(t, c, reader)
	createCleanedUp(t, c, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: reader.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "reader"}}})

	testcluster.WaitFor(t, time.Minute, "the metrics-reader to scrape the metrics over HTTPS and HTTP/1.1", func(ctx context.Context) (bool, error) {
		resp, body, err := secureScrape(ctx, url, readerToken)
		if err != nil {
			return false, err
		}
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("%s: %s", resp.Status, body)
		}
		if resp.ProtoMajor != 1 {
			return false, fmt.Errorf("the metrics server spoke %s: HTTP/2 must be off unless --enable-http2", resp.Proto)
		}
		if !strings.Contains(body, "controller_runtime_") {
			return false, fmt.Errorf("no controller-runtime metrics in %q", body)
		}
		return true, nil
	})
	for _, tc := range []struct {
		who, token string
		want       int
	}{{"an anonymous scraper", "", http.StatusUnauthorized}, {"a token without the metrics-reader role", strangerToken, http.StatusForbidden}} {
		resp, body, err := secureScrape(bg(), url, tc.token)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != tc.want {
			t.Errorf("%s scraped the metrics: %s (%s), want %d", tc.who, resp.Status, body, tc.want)
		}
	}
}

func installationMetricsReader(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	objs, err := config.OperatorObjects(config.OperatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range objs {
		if cr, ok := obj.(*rbacv1.ClusterRole); ok && cr.Name == config.MetricsReaderName {
			return &rbacv1.ClusterRole{Rules: cr.Rules}
		}
	}
	t.Fatalf("the installation has no ClusterRole %s", config.MetricsReaderName)
	return nil
}

func serviceAccountToken(t *testing.T, c *testcluster.Cluster, ns, name string) string {
	t.Helper()
	ctx := bg()
	if _, err := c.Clientset.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := c.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for ServiceAccount %s/%s: %v", ns, name, err)
	}
	return tok.Status.Token
}

// createCleanedUp creates obj and deletes it when the test ends.
func createCleanedUp(t *testing.T, c *testcluster.Cluster, obj client.Object) {
	t.Helper()
	if err := c.Client.Create(bg(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(bg(), obj) })
}

// secureScrape offers HTTP/2 and trusts the server's self-signed certificate.
func secureScrape(ctx context.Context, url, token string) (*http.Response, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the operator's self-signed metrics certificate
		ForceAttemptHTTP2: true,
	}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), nil
}
