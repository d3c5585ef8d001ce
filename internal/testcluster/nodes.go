package testcluster

import (
	"context"
	"testing"
	"time"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// PoolLabel groups the fake nodes of one test; the test's workloads select
	// on it, so tests sharing a cluster never schedule onto each other's nodes.
	PoolLabel = "nodemaintenance.test/pool"
	// KwokNodeAnnotation makes kwok manage a Node as a fake, Ready node.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
)

// Pool is a set of fake nodes reserved for one test's workloads.
type Pool struct {
	c     *Cluster
	Value string
}

// NewPool starts an empty node pool for the test.
func (c *Cluster) NewPool(t testing.TB) *Pool {
	return &Pool{c: c, Value: UniqueName(t, "pool")}
}

// Selector is the node selector that places pods on the pool.
func (p *Pool) Selector() map[string]string { return map[string]string{PoolLabel: p.Value} }

// AddNode adds a fake Ready node to the pool. An empty name picks a unique one.
func (p *Pool) AddNode(t testing.TB, name string) *corev1.Node {
	t.Helper()
	if name == "" {
		name = UniqueName(t, "node")
	}
	return p.c.AddNode(t, name, p.Selector())
}

// AddNodeWithAllocatable adds a fake Ready node to the pool whose capacity
// and allocatable are alloc (cpu, memory, pods), to test what fits where.
// An empty name picks a unique one.
func (p *Pool) AddNodeWithAllocatable(t testing.TB, name string, alloc corev1.ResourceList) *corev1.Node {
	t.Helper()
	if name == "" {
		name = UniqueName(t, "node")
	}
	node := FakeNode(name, p.Selector())
	node.Status.Capacity, node.Status.Allocatable = alloc.DeepCopy(), alloc.DeepCopy()
	node = p.c.addNode(t, node)
	p.c.WaitNotReadyTaintGone(t, node)
	return node
}

// WaitNotReadyTaintGone waits until kube-controller-manager has removed the
// node.kubernetes.io/not-ready taint of a new node, which it does moments
// after kwok reports the node Ready: until then nothing is scheduled there,
// and a drain preview says there is no room on it.
func (c *Cluster) WaitNotReadyTaintGone(t testing.TB, node *corev1.Node) {
	t.Helper()
	name := node.Name
	WaitFor(t, time.Minute, "node "+name+" to lose its not-ready taint", func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return false, err
		}
		for _, taint := range node.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady {
				return false, nil
			}
		}
		return true, nil
	})
}

// AddNode creates a fake node managed by kwok, waits until it is Ready and
// deletes it at cleanup.
func (c *Cluster) AddNode(t testing.TB, name string, labels map[string]string) *corev1.Node {
	t.Helper()
	return c.addNode(t, FakeNode(name, labels))
}

func (c *Cluster) addNode(t testing.TB, node *corev1.Node) *corev1.Node {
	t.Helper()
	name := node.Name
	c.create(t, node)
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), node) })
	WaitFor(t, time.Minute, "node "+name+" to become Ready", func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return false, err
		}
		return validation.NodeReady(node), nil
	})
	return node
}

// FakeNode is a Node that kwok manages and reports Ready, with room for many pods.
func FakeNode(name string, labels map[string]string) *corev1.Node {
	l := map[string]string{
		"kubernetes.io/hostname": name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
		"type":                   "kwok",
	}
	for k, v := range labels {
		l[k] = v
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      l,
			Annotations: map[string]string{KwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}
