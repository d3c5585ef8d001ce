// Package nodewrites lets the operator read a node it has just written as
// it wrote it. The controllers read nodes from the informer cache, which
// learns of a write a few milliseconds to a second after the API server
// answered it: a write guarded by the resourceVersion read from the cache
// right after one of the operator's own (the lifecycle conditions after the
// cordon or the uncordon, the drained mark after the drain's status) lost
// its race with the operator itself, and cost a rejected patch and a live
// read of the node each time (make bench's P7 trace showed about one per
// node maintained).
//
// Recent remembers, for a short while, which version of a node each write
// replaced and the node the API server returned for it. A read from the
// cache that returns a version one of those writes replaced is stale, and
// the node as written is newer: Get returns that instead, following a chain
// of writes. It compares versions for equality only (resourceVersions are
// opaque), and it never invents a version: what it returns is an object the
// API server returned. A write guarded by its resourceVersion is as safe as
// after a live read: anyone who wrote since makes it fail with a conflict,
// and the caller reads live as before.
package nodewrites

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// keep is how long a write is remembered: far longer than the cache
	// takes to see it, short enough that nodes written once are soon
	// forgotten (the memory of a large cluster's nodes is bounded by the
	// nodes written in the last keep).
	keep = 30 * time.Second
	// perNode bounds the writes remembered for one node: a maintenance
	// writes a node a few times in a row at most.
	perNode = 8
)

// Recent is the operator's recent writes of nodes. The zero value is ready;
// a nil *Recent remembers nothing and reads the cache as it is.
type Recent struct {
	mu     sync.Mutex
	writes map[string][]write
	swept  time.Time
	// now is the clock, for tests.
	now func() time.Time
}

// write is one write of a node: the version it replaced, and the node as the
// API server returned it.
type write struct {
	replaced string
	node     *corev1.Node
	at       time.Time
}

func (r *Recent) clock() time.Time {
	if r.now != nil {
		return r.now()
	}
	return time.Now()
}

// Get reads node name through c (the informer cache) into node and, when
// the version read is one a remembered write replaced, puts the node as
// that write left it there instead (and so on along the writes that came
// after it).
func (r *Recent) Get(ctx context.Context, c client.Reader, name string, node *corev1.Node) error {
	if err := c.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return err
	}
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	writes := r.writes[name]
	for range writes { // each step moves to a newer write; no more steps than writes
		w, ok := replacing(writes, node.ResourceVersion)
		if !ok {
			break
		}
		w.node.DeepCopyInto(node)
	}
	return nil
}

// Write is a guarded write of node name: it reads the node through cache as
// the operator's recent writes left it (Get), and calls write with it. write
// changes the node and sends the change guarded by the resourceVersion read
// (a patch with that version, an update), leaving the node the API server
// returned in its argument, and reports whether it wrote (false: nothing to
// change). A write that lost a race (a conflict: someone else wrote since,
// or the cache is behind a write this process did not make) is tried again
// on the node read live through live, up to attempts times in all. What was
// written is remembered (Wrote). It reports whether it wrote, and returns
// the read's or the last write's error as it is.
func (r *Recent) Write(ctx context.Context, cache, live client.Reader, name string, attempts int, write func(node *corev1.Node) (bool, error)) (bool, error) {
	read := func(node *corev1.Node) error { return r.Get(ctx, cache, name, node) }
	var err error
	for range attempts {
		node := &corev1.Node{}
		if err = read(node); err != nil {
			return false, err
		}
		replaced := node.ResourceVersion
		var wrote bool
		if wrote, err = write(node); err == nil {
			if wrote {
				r.Wrote(replaced, node)
			}
			return wrote, nil
		}
		if !apierrors.IsConflict(err) {
			return false, err
		}
		read = func(node *corev1.Node) error { return live.Get(ctx, client.ObjectKey{Name: name}, node) }
	}
	return false, err
}

// replacing is the write among writes that replaced version rv.
func replacing(writes []write, rv string) (write, bool) {
	for _, w := range writes {
		if w.replaced == rv {
			return w, true
		}
	}
	return write{}, false
}

// Wrote remembers that a write replaced version replaced of a node with
// written, the node the API server returned. written is copied.
func (r *Recent) Wrote(replaced string, written *corev1.Node) {
	if r == nil || replaced == "" || written.ResourceVersion == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock()
	if r.writes == nil {
		r.writes = map[string][]write{}
	}
	if now.Sub(r.swept) > keep {
		for name, ws := range r.writes {
			if ws = fresh(ws, now); len(ws) == 0 {
				delete(r.writes, name)
			} else {
				r.writes[name] = ws
			}
		}
		r.swept = now
	}
	ws := append(fresh(r.writes[written.Name], now), write{replaced: replaced, node: written.DeepCopy(), at: now})
	if len(ws) > perNode {
		ws = ws[len(ws)-perNode:]
	}
	r.writes[written.Name] = ws
}

// fresh is the writes made within keep of now, oldest first.
func fresh(ws []write, now time.Time) []write {
	i := 0
	for i < len(ws) && now.Sub(ws[i].at) > keep {
		i++
	}
	return ws[i:]
}
