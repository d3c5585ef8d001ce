package kubeconfig

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// failingPlugin writes a credential plugin that counts its runs in a file,
// explains itself on stderr and fails.
func failingPlugin(t *testing.T) (command, runs string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the plugin is a shell script")
	}
	dir := t.TempDir()
	runs = filepath.Join(dir, "runs")
	command = filepath.Join(dir, "corp-credentials.sh")
	script := "#!/bin/sh\necho run >> '" + runs + "'\necho 'corp-login: your session expired, run corp-login again' >&2\nexit 1\n"
	if err := os.WriteFile(command, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return command, runs
}

func countRuns(t *testing.T, runs string) int {
	t.Helper()
	b, err := os.ReadFile(runs)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "run\n")
}

// A failing plugin runs once per request, inside client-go, and what it said
// on stderr is still at hand for the error message.
func TestExecStderrCapturesAPluginThatRanOnce(t *testing.T) {
	command, runs := failingPlugin(t)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer server.Close()
	cfg := &rest.Config{Host: server.URL, ExecProvider: &clientcmdapi.ExecConfig{
		APIVersion: ExecAPIVersionV1, Command: command, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}

	var hc *http.Client
	if err := WithExecStderr(func() (err error) { hc, err = rest.HTTPClientFor(cfg); return err }); err != nil {
		t.Fatal(err)
	}
	if n := countRuns(t, runs); n != 0 {
		t.Fatalf("building the client ran the plugin %d times", n)
	}
	resp, err := hc.Get(server.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("request succeeded with a failing plugin")
	}
	if !strings.Contains(err.Error(), "getting credentials: exec") {
		t.Errorf("error %q is not client-go's exec failure", err)
	}
	if got := ExecStderr(); !strings.Contains(got, "corp-login: your session expired") {
		t.Errorf("ExecStderr() = %q, want the plugin's message", got)
	}
	if n := countRuns(t, runs); n != 1 {
		t.Errorf("the plugin ran %d times, want once", n)
	}
}
