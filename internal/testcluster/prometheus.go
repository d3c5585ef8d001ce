package testcluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Prometheus is a Prometheus server of `make tools` (hack/tools.sh
// prometheus) that one test started on a free loopback port, with its own
// configuration and storage in a temporary directory.
type Prometheus struct {
	// URL is the server's base URL, http://127.0.0.1:<port>.
	URL string
	log string
}

// PrometheusOptions is what the server scrapes and evaluates.
type PrometheusOptions struct {
	// Targets are host:port addresses scraped every second at /metrics.
	Targets []string
	// Rules is a rule file (YAML, Prometheus's format), evaluated every
	// second.
	Rules string
}

// StartPrometheus starts a Prometheus server for the test, waits until it is
// ready, and stops it when the test ends (its log is printed when the test
// failed). It needs the prometheus binary of `make tools`.
func StartPrometheus(t testing.TB, o PrometheusOptions) *Prometheus {
	t.Helper()
	bin, err := Tool("prometheus")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), []byte(o.Rules), 0o644); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules.yml]
scrape_configs:
  - job_name: test
    static_configs:
      - targets: ['%s']
`, strings.Join(o.Targets, "', '"))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &Prometheus{URL: fmt.Sprintf("http://127.0.0.1:%d", port), log: filepath.Join(dir, "prometheus.log")}
	logFile, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port))
	// It talks to this machine only; killed with the test process.
	cmd.Env = localEnv()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", p.logTail(40))
		}
	})
	if err := p.waitReady(exited); err != nil {
		t.Fatalf("prometheus at %s: %v\n%s", p.URL, err, p.logTail(40))
	}
	return p
}

// waitReady polls /-/ready until the server answers 200.
func (p *Prometheus) waitReady(exited <-chan struct{}) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/-/ready", nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("it exited before it was ready")
		case <-ctx.Done():
			return fmt.Errorf("not ready within a minute")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (p *Prometheus) logTail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	return tail(string(b), n)
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
