package testcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Kubectl runs the pinned kubectl against the cluster and returns its
// combined output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd, err := command("kubectl", append([]string{"--kubeconfig", c.KubeconfigPath}, args...)...)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = runContext(ctx, cmd)
	if err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// DumpLogs writes the tail of every component's log to w and the full logs
// to .local/test-logs/<cluster>/ in the repository.
func (c *Cluster) DumpLogs(w *os.File) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(os.TempDir(), c.Name+"-logs")
	if root, err := RepoRoot(); err == nil {
		dir = filepath.Join(root, ".local", "test-logs", c.Name)
	}
	_ = os.MkdirAll(dir, 0o755)
	fmt.Fprintf(w, "\n=== cluster %s logs (full logs in %s)\n", c.Name, dir)
	for _, comp := range Components {
		out, err := c.kwokctl(ctx, "logs", comp, "--name", c.Name)
		if err != nil {
			fmt.Fprintf(w, "--- %s: cannot read logs: %v\n", comp, err)
			continue
		}
		_ = os.WriteFile(filepath.Join(dir, comp+".log"), out, 0o644)
		fmt.Fprintf(w, "--- %s (last lines)\n%s\n", comp, tail(string(out), 15))
	}
	for _, n := range c.RealNodes {
		fmt.Fprint(w, n.LogTails(15))
	}
}

func (c *Cluster) kwokctl(ctx context.Context, args ...string) ([]byte, error) {
	cmd, err := command("kwokctl", args...)
	if err != nil {
		return nil, err
	}
	// kwokctl's binary runtime passes its environment on to every component:
	// kube-apiserver must not send what it dials (webhooks, kubelets)
	// through a proxy.
	cmd.Env = localEnv("KWOK_WORKDIR=" + filepath.Join(c.workDir, "kwok"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := runContext(ctx, cmd); err != nil {
		return stdout.Bytes(), fmt.Errorf("kwokctl %s: %w\n%s", strings.Join(args, " "), err, tail(stderr.String(), 30))
	}
	return stdout.Bytes(), nil
}

// runContext runs cmd and kills it when ctx ends.
func runContext(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return errors.Join(ctx.Err(), fmt.Errorf("%s was killed", filepath.Base(cmd.Path)))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
