package testcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// RealNodeKwokctlArgs are the `kwokctl create cluster` arguments for a
// cluster with real nodes (hack/cluster.sh passes the same). kwokctl v0.8.0
// panics on --extra-args unless each component's first one comes before any
// repeat, hence the interleaving.
func RealNodeKwokctlArgs() []string {
	return []string{
		// kwokctl starts kwok with --manage-all-nodes=true: kwok would take
		// over the kubelet's node. Manage only the fake ones.
		"--extra-args", "kwok-controller=manage-all-nodes=false",
		// Webhooks and aggregated APIs dial endpoint IPs: no kube-proxy needed.
		"--extra-args", "kube-apiserver=enable-aggregator-routing=true",
		"--extra-args", "kwok-controller=manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
		// logs and exec reach the kubelet at its node IP.
		"--extra-args", "kube-apiserver=kubelet-preferred-address-types=InternalIP",
		"--extra-args", "kube-apiserver=service-cluster-ip-range=" + ServiceCIDR,
	}
}

// AddRealNode starts a real node named name with extra labels, waits until
// it is Ready, and adds it to c.RealNodes; Stop tears it down.
func (c *Cluster) AddRealNode(ctx context.Context, name string, labels map[string]string) error {
	start := time.Now()
	n, err := StartRealNode(ctx, RealNodeConfig{Name: name, Dir: filepath.Join(c.workDir, "realnodes", name), Kubeconfig: c.KubeconfigPath, Labels: labels})
	if err != nil {
		return fmt.Errorf("start real node %s: %w", name, err)
	}
	c.RealNodes = append(c.RealNodes, n)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		node, err := c.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == "Ready" && cond.Status == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("real node %s did not become Ready: %w\n%s", name, err, n.LogTails(30))
	}
	fmt.Fprintf(os.Stderr, "real node %s Ready %s after its start\n", name, time.Since(start).Round(10*time.Millisecond))
	return nil
}

// stopRealNodes tears down every real node found under dir/realnodes.
func stopRealNodes(dir string) {
	nodes, _ := filepath.Glob(filepath.Join(dir, "realnodes", "*"))
	for _, n := range nodes {
		start := time.Now()
		if err := StopRealNode(n); err != nil {
			fmt.Fprintf(os.Stderr, "warning: stopping real node %s: %v\n", n, err)
			continue
		}
		fmt.Fprintf(os.Stderr, "real node %s stopped and removed in %s\n", filepath.Base(n), time.Since(start).Round(10*time.Millisecond))
	}
}
