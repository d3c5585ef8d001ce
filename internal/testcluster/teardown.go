package testcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ownerFile in a cluster's scratch directory holds the pid of the test
// process that started it.
const ownerFile = "owner.pid"

// reapOrphans deletes the clusters of test processes that died without
// tearing down (a panic, a go test -timeout, a kill): each holds about 600 MB.
func reapOrphans(ctx context.Context) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "nmt-*", ownerFile))
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || syscall.Kill(pid, 0) == nil {
			continue // alive (or unreadable): not ours to touch
		}
		dir := filepath.Dir(f)
		stopRealNodes(dir)
		StopKubeProxy(dir)
		clusters, _ := os.ReadDir(filepath.Join(dir, "kwok", "clusters"))
		for _, cl := range clusters {
			orphan := &Cluster{Name: cl.Name(), workDir: dir}
			if _, err := orphan.kwokctl(ctx, "delete", "cluster", "--name", cl.Name()); err != nil {
				fmt.Fprintf(os.Stderr, "warning: could not delete orphaned test cluster %s: %v\n", cl.Name(), err)
				continue
			}
			fmt.Fprintf(os.Stderr, "deleted orphaned test cluster %s (its test process %d is gone)\n", cl.Name(), pid)
		}
		_ = os.RemoveAll(dir)
	}
}

// Stop deletes the cluster and its scratch directory. It is safe to call twice.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		stopRealNodes(c.workDir)
		StopKubeProxy(c.workDir)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := c.kwokctl(ctx, "delete", "cluster", "--name", c.Name); err != nil {
			fmt.Fprintf(os.Stderr, "warning: deleting test cluster %s: %v\n%s\n", c.Name, err, out)
		}
		_ = os.RemoveAll(c.workDir)
	})
}
