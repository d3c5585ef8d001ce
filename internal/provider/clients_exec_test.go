package provider

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/kubeconfig"
)

// A failing credential plugin runs once: it is not run again to explain
// itself (it may prompt for MFA or have side effects), and the diagnostic
// quotes what it said on stderr in the run client-go made.
func TestExecFailureQuotesThePluginWithoutRunningItAgain(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the plugin is a shell script")
	}
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	command := filepath.Join(dir, "corp-credentials.sh")
	script := "#!/bin/sh\necho run >> '" + runs + "'\necho 'corp-login: your session expired, run corp-login again' >&2\nexit 1\n"
	if err := os.WriteFile(command, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer server.Close()
	cfg := &rest.Config{Host: server.URL, ExecProvider: &clientcmdapi.ExecConfig{
		APIVersion: kubeconfig.ExecAPIVersionV1, Command: command, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
	c, err := newClients(cfg, "test", server.URL)
	if err != nil {
		t.Fatal(err)
	}
	err = c.kube.Get(context.Background(), client.ObjectKey{Name: "maintain-node02"}, &nmv1beta1.NodeMaintenance{})
	if err == nil {
		t.Fatal("read succeeded with a failing plugin")
	}
	b, _ := os.ReadFile(runs)
	before := strings.Count(string(b), "run\n")
	var diags diag.Diagnostics
	c.apiError(&diags, "Cannot Read NodeMaintenance", `Reading NodeMaintenance "maintain-node02"`, err)
	if len(diags) != 1 || diags[0].Summary() != "Kubernetes Credential Plugin Failed" {
		t.Fatalf("diagnostics %v", diags)
	}
	detail := diags[0].Detail()
	for _, want := range []string{"corp-credentials.sh", "exit code 1", "The plugin's error output:\ncorp-login: your session expired", "log in again"} {
		if !strings.Contains(detail, want) {
			t.Errorf("detail does not say %q:\n%s", want, detail)
		}
	}
	b, _ = os.ReadFile(runs)
	if after := strings.Count(string(b), "run\n"); before != 1 || after != 1 {
		t.Errorf("the plugin ran %d times for the read and %d more to explain the failure, want once in all", before, after-before)
	}
}
