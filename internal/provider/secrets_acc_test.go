package provider_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// Credentials never leak: a whole plan, apply, refresh and destroy, with
// the CLI's trace log on, through three provider configurations (a bearer
// token, an exec plugin that gets its token from its environment, a client
// certificate and key) leaves none of the secrets in the CLI's output, its
// trace log (the provider's own log lines included), the plan as shown, or the
// state. The secrets come in through ordinary, non-sensitive variables: what
// keeps them out is the provider, not a variable's sensitive flag.
func TestAccCredentialsStayOutOfOutputLogsAndState(t *testing.T) {
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		creds := newTestCredentials(t, c)
		if len(creds.caPEM) == 0 {
			t.Fatal("the test cluster's kubeconfig has no CA")
		}
		tokenA, tokenB := adminToken(t, c), adminToken(t, c)
		certPEM, keyPEM := c.RESTConfig.CertData, c.RESTConfig.KeyData
		if len(keyPEM) == 0 && c.RESTConfig.KeyFile != "" {
			var err error
			if certPEM, err = os.ReadFile(c.RESTConfig.CertFile); err != nil {
				t.Fatal(err)
			}
			if keyPEM, err = os.ReadFile(c.RESTConfig.KeyFile); err != nil {
				t.Fatal(err)
			}
		}
		if len(keyPEM) == 0 {
			t.Fatal("the test cluster's kubeconfig has no client key")
		}

		pool := c.NewPool(t)
		nodes := []string{pool.AddNode(t, "").Name, pool.AddNode(t, "").Name, pool.AddNode(t, "").Name}
		dir := t.TempDir()
		plugin := filepath.Join(dir, "credential-plugin.sh")
		if err := os.WriteFile(plugin, []byte(`#!/bin/sh
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}\n' "$NM_PROBE_TOKEN"
`), 0o755); err != nil {
			t.Fatal(err)
		}
		cfg := requiredProvider + fmt.Sprintf(`
variable "token" {}
variable "exec_token" {}
variable "client_certificate" {}
variable "client_key" {}

locals {
  host = %[1]q
  ca   = %[2]q
}

provider "nodemaintenance" {
  host                   = local.host
  cluster_ca_certificate = local.ca
  token                  = var.token
}

provider "nodemaintenance" {
  alias                  = "exec"
  host                   = local.host
  cluster_ca_certificate = local.ca
  exec {
    api_version = "client.authentication.k8s.io/v1"
    command     = %[3]q
    env         = { NM_PROBE_TOKEN = var.exec_token }
  }
}

provider "nodemaintenance" {
  alias                  = "cert"
  host                   = local.host
  cluster_ca_certificate = local.ca
  client_certificate     = var.client_certificate
  client_key             = var.client_key
}

resource "nodemaintenance" "token" {
  node_name = %[4]q
  reason    = "secrets stay out"
}

resource "nodemaintenance" "exec" {
  provider  = nodemaintenance.exec
  node_name = %[5]q
}

resource "nodemaintenance" "cert" {
  provider  = nodemaintenance.cert
  node_name = %[6]q
}

data "nodemaintenance_list" "all" {
  provider   = nodemaintenance.exec
  depends_on = [nodemaintenance.token, nodemaintenance.exec, nodemaintenance.cert]
}

output "in_maintenance" {
  value = length(data.nodemaintenance_list.all.items)
}
`, c.RESTConfig.Host, creds.caPEM, plugin, nodes[0], nodes[1], nodes[2])
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}

		logPath := filepath.Join(dir, "trace.log")
		tf := newCLIRun(t, dir)
		tf.env = append(tf.env, "TF_LOG=trace", "TF_LOG_PATH="+logPath,
			"TF_VAR_token="+tokenA, "TF_VAR_exec_token="+tokenB,
			"TF_VAR_client_certificate="+string(certPEM), "TF_VAR_client_key="+string(keyPEM))
		destroyed := false
		t.Cleanup(func() {
			if !destroyed {
				_, _ = tf.run(t, "destroy", "-auto-approve")
			}
		})

		var outputs []string
		for _, args := range [][]string{
			{"plan", "-out", "plan.out"},
			{"show", "plan.out"}, // outputs[1]
			{"apply", "plan.out"},
			{"plan", "-refresh-only"},
			{"show"},
			{"show", "-json"},
			{"output", "-json"},
		} {
			outputs = append(outputs, tf.mustRun(t, args...))
		}
		for _, node := range nodes {
			if err := nodeCheck(c, node, cordoned)(nil); err != nil {
				t.Error(err)
			}
		}
		state := readAll(t, filepath.Join(dir, "terraform.tfstate"))
		outputs = append(outputs, tf.mustRun(t, "destroy", "-auto-approve"))
		destroyed = true
		for _, node := range nodes {
			if err := nodeCheck(c, node, schedulable)(nil); err != nil {
				t.Error(err)
			}
		}
		trace := readAll(t, logPath)
		if !strings.Contains(trace, "provider.terraform-provider-nodemaintenance") {
			t.Fatalf("the trace log %s has no line of the provider: it does not show what the provider logs", logPath)
		}

		secrets := map[string]string{
			"the bearer token":             tokenA,
			"the exec plugin's token":      tokenB,
			"the token's signature":        tokenA[strings.LastIndexByte(tokenA, '.')+1:],
			"the client key":               pemBody(t, keyPEM),
			"the client key, base64 again": base64.StdEncoding.EncodeToString(keyPEM)[:48],
		}
		places := map[string]string{
			"the CLI output":          strings.Join(outputs, "\n"),
			"the trace log":           trace,
			"the state":               state,
			"the state after destroy": readAll(t, filepath.Join(dir, "terraform.tfstate")),
		}
		for what, secret := range secrets {
			for where, text := range places {
				if i := strings.Index(text, secret); i >= 0 {
					t.Errorf("%s appears in %s: ...%s...", what, where, excerpt(text, i, len(secret)))
				}
			}
		}
		// The variables carried the secrets into the CLI; the provider's
		// sensitive attributes are what the plan shows instead.
		if !strings.Contains(outputs[1], "nodemaintenance.token") {
			t.Errorf("the plan as shown does not list the maintenances:\n%s", outputs[1])
		}
	})
}

// adminToken is a TokenRequest token of a new ServiceAccount bound to
// cluster-admin: a real credential of the package cluster, unique to the call.
func adminToken(t *testing.T, c *testcluster.Cluster) string {
	t.Helper()
	ctx := context.Background()
	ns := c.Namespace(t)
	name := testcluster.UniqueName(t, "probe")
	if _, err := c.Clientset.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metaName(name)}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metaName(name),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	if _, err := c.Clientset.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Clientset.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	tr, err := c.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// pemBody is the first base64 line of a PEM block: what a leak of the key
// would show even when the header lines are cut.
func pemBody(t *testing.T, pemData []byte) string {
	t.Helper()
	for _, line := range strings.Split(string(pemData), "\n") {
		if line != "" && !strings.HasPrefix(line, "-----") {
			return line
		}
	}
	t.Fatal("the client key is not PEM")
	return ""
}

func readAll(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// excerpt is text around [i, i+n) with the secret itself masked, for a
// failure message that does not leak it further.
func excerpt(text string, i, n int) string {
	from, to := max(0, i-80), min(len(text), i+n+40)
	return text[from:i] + "<SECRET>" + text[i+n:to]
}
