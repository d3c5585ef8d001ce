package testoperator

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// Process is the operator binary, built from this checkout and run as a
// process of its own (as `make run` does): for tests that kill it, and for
// benchmarks that measure its memory, CPU and API requests alone.
type Process struct {
	// Bin is the operator binary; Dir holds it, its log and its certificates.
	Bin, Dir string
	// Cmd is the running process, set by Start.
	Cmd *exec.Cmd
	// MetricsURL is the Prometheus endpoint and PprofURL the pprof root of
	// the running process.
	MetricsURL, PprofURL string
	// LogPath collects the output of every start, one after the other.
	LogPath string
	// WebhookPort is where the running process serves its webhook.
	WebhookPort int

	exited chan struct{}
}

// BuildProcess builds the operator binary into a new scratch directory.
func BuildProcess() (*Process, error) {
	dir, err := os.MkdirTemp("", "nm-operator-process-")
	if err != nil {
		return nil, err
	}
	p := &Process{Bin: filepath.Join(dir, "node-maintenance-operator"), Dir: dir, LogPath: filepath.Join(dir, "operator.log")}
	if err := testcluster.Build("./operator/cmd/node-maintenance-operator", p.Bin); err != nil {
		return nil, err
	}
	return p, nil
}

// Start runs the binary against c, out of cluster (webhook by URL on a
// loopback port), with extra flags appended, and returns once its webhook
// answers.
func (p *Process) Start(c *testcluster.Cluster, extra ...string) error {
	ports := make([]int, 4)
	for i := range ports {
		port, err := FreePort()
		if err != nil {
			return err
		}
		ports[i] = port
	}
	p.WebhookPort = ports[0]
	p.MetricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[1])
	p.PprofURL = fmt.Sprintf("http://127.0.0.1:%d/debug/pprof", ports[3])
	logFile, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	args := append([]string{"--kubeconfig", c.KubeconfigPath,
		"--local-webhook-url", fmt.Sprintf("https://127.0.0.1:%d", ports[0]),
		"--webhook-port", strconv.Itoa(ports[0]), "--webhook-host", "127.0.0.1",
		"--webhook-cert-dir", filepath.Join(p.Dir, "certs"),
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", ports[2]),
		"--pprof-bind-address", fmt.Sprintf("127.0.0.1:%d", ports[3])}, extra...)
	p.Cmd = exec.Command(p.Bin, args...)
	p.Cmd.Stdout, p.Cmd.Stderr = logFile, logFile
	if err := p.Cmd.Start(); err != nil {
		logFile.Close()
		return err
	}
	exited := make(chan struct{})
	p.exited = exited
	go func() { _ = p.Cmd.Wait(); logFile.Close(); close(exited) }()

	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := WebhookAnswers(context.Background(), c)
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("the operator exited at start; log: %s", p.LogPath)
		default:
		}
		if time.Now().After(deadline) {
			p.Stop()
			return fmt.Errorf("the operator's webhook did not become ready: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Running reports whether the process started last is still running.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return p.exited != nil
	}
}

// Pid is the process id of the running binary.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Stop ends the process as Kubernetes does (SIGTERM, SIGKILL after 30s) and
// waits for it. Safe on nil and on a process that is not running.
func (p *Process) Stop() { p.end(syscall.SIGTERM, 30*time.Second) }

// Remove stops the process and deletes its directory: the binary, its log
// and its certificates. Safe on nil.
func (p *Process) Remove() {
	if p == nil {
		return
	}
	p.Stop()
	_ = os.RemoveAll(p.Dir)
}

// Kill ends the process with SIGKILL, as a node crash or an OOM kill does,
// and waits for it.
func (p *Process) Kill() { p.end(syscall.SIGKILL, 0) }

func (p *Process) end(sig syscall.Signal, grace time.Duration) {
	if p == nil || p.Cmd == nil || p.Cmd.Process == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.Cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.Cmd.Process.Kill()
		<-p.exited
	}
}
