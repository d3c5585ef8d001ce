package testcluster

import (
	"context"
	"os"
	"testing"
	"time"
)

// RealNodesEnv opts in to the tests on real (kubelet-run) nodes: they need
// root, containerd and the kubelet (and kube-proxy) from `make tools`, and
// start a cluster of their own. `make test` sets it unless
// REAL_NODE_TESTS=0.
const RealNodesEnv = "NM_REAL_NODES"

// StartReal starts a cluster of the test's own with o's real nodes, and stops
// it when the test ends, with every component's log (the real nodes'
// included) if the test failed. It skips without TF_ACC or RealNodesEnv and
// fails without root.
func StartReal(t *testing.T, name string, o Options) *Cluster {
	t.Helper()
	Get(t) // skips without TF_ACC
	if os.Getenv(RealNodesEnv) == "" {
		t.Skipf("needs real nodes: run with %s=1 (and TF_ACC=1, as root, after `make tools`)", RealNodesEnv)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("%s=1 asks for real nodes, which need root (kubelet and containerd); run as root or unset %s (make test REAL_NODE_TESTS=0)", RealNodesEnv, RealNodesEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := StartWith(ctx, name, o)
	if c != nil {
		t.Cleanup(c.Stop)
	}
	if err != nil {
		if c != nil {
			c.DumpLogs(os.Stderr)
		}
		t.Fatalf("start a cluster with %d real node(s) (kube-proxy %v): %v", o.RealNodes, o.KubeProxy, err)
	}
	t.Logf("cluster with %d real node(s) (kube-proxy %v) up in %s", o.RealNodes, o.KubeProxy, time.Since(start).Round(10*time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			c.DumpLogs(os.Stderr)
		}
	})
	return c
}
