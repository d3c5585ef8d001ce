package nodewrites

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cache is a reader that holds one version of each node, as an informer
// cache that has not seen the latest writes.
type cache map[string]*corev1.Node

func (c cache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	c[key.Name].DeepCopyInto(obj.(*corev1.Node))
	return nil
}

func (c cache) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func node(name, rv string, unschedulable bool) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}, Spec: corev1.NodeSpec{Unschedulable: unschedulable}}
}

func get(t *testing.T, r *Recent, c cache, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	if err := r.Get(context.Background(), c, name, n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A read that returns a version the operator's own writes replaced gets
// the node as the last of those writes left it; a version no write
// replaced (the cache caught up, or someone else wrote) is read as it is.
func TestGetSeesTheWritesTheCacheHasNot(t *testing.T) {
	c := cache{"n1": node("n1", "10", false), "n2": node("n2", "20", false)}
	r := &Recent{}
	r.Wrote("10", node("n1", "11", true))  // the cordon
	r.Wrote("11", node("n1", "12", true))  // the conditions after it, read through r
	r.Wrote("99", node("n2", "100", true)) // a write over a version the cache never had

	if n := get(t, r, c, "n1"); n.ResourceVersion != "12" || !n.Spec.Unschedulable {
		t.Errorf("n1 read with the cache at 10: version %s unschedulable %v, want the last write (12, true)", n.ResourceVersion, n.Spec.Unschedulable)
	}
	c["n1"] = node("n1", "11", true)
	if n := get(t, r, c, "n1"); n.ResourceVersion != "12" {
		t.Errorf("n1 read with the cache at 11: version %s, want 12", n.ResourceVersion)
	}
	c["n1"] = node("n1", "13", false) // someone uncordoned it after our writes
	if n := get(t, r, c, "n1"); n.ResourceVersion != "13" || n.Spec.Unschedulable {
		t.Errorf("n1 read with the cache at 13: version %s unschedulable %v, want the cache's (13, false)", n.ResourceVersion, n.Spec.Unschedulable)
	}
	if n := get(t, r, c, "n2"); n.ResourceVersion != "20" {
		t.Errorf("n2: version %s, want the cache's 20", n.ResourceVersion)
	}

	// What Get returns is a copy: changing it changes nothing remembered.
	c["n1"] = node("n1", "10", false)
	n := get(t, r, c, "n1")
	n.Spec.Unschedulable = false
	if again := get(t, r, c, "n1"); !again.Spec.Unschedulable {
		t.Error("a change to a node Get returned changed the remembered write")
	}
}

// Writes are forgotten after keep, and a node keeps at most perNode of them,
// so that a large cluster's nodes are not held in memory for good.
func TestWritesAreForgotten(t *testing.T) {
	at := time.Date(2026, 12, 6, 14, 0, 0, 0, time.UTC)
	r := &Recent{now: func() time.Time { return at }}
	c := cache{"n1": node("n1", "1", false), "n2": node("n2", "1", false)}
	r.Wrote("1", node("n1", "2", true))
	at = at.Add(keep + time.Second)
	r.Wrote("1", node("n2", "2", true)) // sweeps n1's write
	if n := get(t, r, c, "n1"); n.ResourceVersion != "1" {
		t.Errorf("n1 after keep: version %s, want the cache's 1", n.ResourceVersion)
	}
	if _, ok := r.writes["n1"]; ok {
		t.Error("n1's expired write is still held")
	}
	if n := get(t, r, c, "n2"); n.ResourceVersion != "2" {
		t.Errorf("n2: version %s, want its write's 2", n.ResourceVersion)
	}
	for v := 2; v < 2+2*perNode; v++ {
		r.Wrote(strconv.Itoa(v), node("n2", strconv.Itoa(v+1), true))
	}
	if got := len(r.writes["n2"]); got != perNode {
		t.Errorf("n2 holds %d writes, want at most %d", got, perNode)
	}
}

// A nil Recent reads the cache as it is and remembers nothing.
func TestNilRecentReadsTheCache(t *testing.T) {
	var r *Recent
	r.Wrote("1", node("n1", "2", true))
	if n := get(t, r, cache{"n1": node("n1", "1", false)}, "n1"); n.ResourceVersion != "1" {
		t.Errorf("version %s, want the cache's 1", n.ResourceVersion)
	}
}

// store is a node API server of one node for Write: a guarded write of a
// version other than its own conflicts, as the API server's does.
type store struct {
	node  *corev1.Node
	reads int
}

func (s *store) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	s.reads++
	s.node.DeepCopyInto(obj.(*corev1.Node))
	return nil
}

func (s *store) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// cordon is a write that cordons n guarded by its version, on s.
func (s *store) cordon(n *corev1.Node) (bool, error) {
	if n.Spec.Unschedulable {
		return false, nil
	}
	if n.ResourceVersion != s.node.ResourceVersion {
		return false, apierrors.NewConflict(schema.GroupResource{Resource: "nodes"}, n.Name, errors.New("the object has been modified"))
	}
	v, _ := strconv.Atoi(n.ResourceVersion)
	n.Spec.Unschedulable = true
	n.ResourceVersion = strconv.Itoa(v + 1)
	s.node = n.DeepCopy()
	return true, nil
}

// Write tries the node as the cache (and the recent writes) have it, and
// after a conflict the node read live; it remembers what it wrote, so that
// a read right after it from the same stale cache sees the write; and it
// writes nothing when there is nothing to change.
func TestWriteRetriesLiveAfterAConflictAndRemembers(t *testing.T) {
	ctx := context.Background()
	r := &Recent{}
	live := &store{node: node("n1", "11", false)} // someone wrote 11 after the 10 the cache has
	c := cache{"n1": node("n1", "10", false)}
	tries := 0
	wrote, err := r.Write(ctx, c, live, "n1", 3, func(n *corev1.Node) (bool, error) { tries++; return live.cordon(n) })
	if err != nil || !wrote {
		t.Fatalf("Write: wrote %v, error %v; want a write", wrote, err)
	}
	if tries != 2 || live.reads != 1 {
		t.Errorf("%d tries and %d live reads, want 2 (the cache's version, then the live one) and 1", tries, live.reads)
	}
	if n := get(t, r, cache{"n1": node("n1", "11", false)}, "n1"); n.ResourceVersion != "12" || !n.Spec.Unschedulable {
		t.Errorf("read after the write from a cache at 11: version %s unschedulable %v, want the write's (12, true)", n.ResourceVersion, n.Spec.Unschedulable)
	}

	// Nothing to change: no write, nothing remembered over version 12.
	wrote, err = r.Write(ctx, cache{"n1": node("n1", "12", true)}, live, "n1", 3, live.cordon)
	if err != nil || wrote {
		t.Errorf("Write of a cordoned node: wrote %v, error %v; want neither", wrote, err)
	}
	if _, ok := replacing(r.writes["n1"], "12"); ok {
		t.Error("a write that changed nothing was remembered")
	}

	// Conflicts every time: the last conflict after attempts tries.
	live = &store{node: node("n2", "5", false)}
	tries = 0
	_, err = r.Write(ctx, cache{"n2": node("n2", "4", false)}, live, "n2", 3, func(n *corev1.Node) (bool, error) {
		tries++
		live.node.ResourceVersion += "0" // someone writes before each try
		return live.cordon(n)
	})
	if !apierrors.IsConflict(err) || tries != 3 {
		t.Errorf("Write against a node written before each try: %d tries, error %v; want 3 and a conflict", tries, err)
	}
}
