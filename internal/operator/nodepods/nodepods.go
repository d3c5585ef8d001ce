// Package nodepods caches the pods of the nodes under maintenance, and no
// others: one informer per node, listing and watching only that node's pods
// (fieldSelector spec.nodeName=<node>). A node's informer starts when the
// first NodeMaintenance of the node holds it and stops when the last one lets
// go, so the operator's memory grows with the nodes it drains, not with the
// pods of the cluster.
//
// The informers are client-go's SharedIndexInformer, one per node, rather
// than a controller-runtime cache per node: a controller-runtime cache is
// built for many kinds (a REST mapper, an informer map, a client reader) and
// is started and waited for as a whole, while a drain needs one kind on one
// node, a store to read, its sync signal and its events. The informer gives
// exactly that, and stopping it is cancelling its context.
//
// A node's pods are read only once its informer has synced: before the first
// list is in, an empty store says nothing, and a drain plan built from it would
// find the node drained. Pods says so rather than answer.
package nodepods

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// NodeNameField is the pods' field a node's informer selects on.
const NodeNameField = "spec.nodeName"

// NewInformer makes the (not yet started) informer of one node's pods.
type NewInformer func(node string) cache.SharedIndexInformer

// Informers makes each node's informer with clientset: a list and a watch of
// the pods whose spec.nodeName is the node (PodsOf).
func Informers(clientset kubernetes.Interface) NewInformer {
	return func(node string) cache.SharedIndexInformer {
		return cache.NewSharedIndexInformer(PodsOf(clientset, node), &corev1.Pod{}, 0, nil)
	}
}

// PodsOf lists and watches the pods whose spec.nodeName is node. It lists
// first and then watches from the list's version, never one watch that
// streams the initial list (client-go's WatchListClient, on by default):
// the API server's watch cache answers a list selecting spec.nodeName from
// its index of the pods by node, but serves a streamed initial list by
// checking every pod of the cluster against the selector. At 5000 nodes and
// 50 000 pods, checks of that kind were about a third of kube-apiserver's
// CPU profile while maintenances started (make bench BENCH=P8; that they
// came from these informers is inferred), for each drain's few pods.
func PodsOf(clientset kubernetes.Interface, node string) cache.ListerWatcher {
	selector := fields.OneTermEqualSelector(NodeNameField, node).String()
	pods := clientset.CoreV1().Pods(metav1.NamespaceAll)
	return listThenWatch{&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			if o.ResourceVersion == "0" {
				// The reflector's first list asks for whatever the watch
				// cache holds, which may be moments behind a pod bound
				// just before the cordon: a drain planned on it could end
				// with that pod still running. A consistent list without
				// a limit is answered once the watch cache has caught up
				// with etcd, still from its index by node.
				o.ResourceVersion, o.Limit = "", 0
			}
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return pods.Watch(ctx, o)
		},
	}}
}

// listThenWatch is a ListWatch whose reflector lists, then watches: it says
// it does not support the watch-list semantics (client-go's
// watchlist.DoesClientNotSupportWatchListSemantics).
type listThenWatch struct{ *cache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// Cache holds the pods of the nodes that NodeMaintenances hold. It is a
// manager runnable: Start gives it the context its informers run in (the
// leader's), and their end.
type Cache struct {
	newInformer NewInformer
	transform   cache.TransformFunc
	changes     chan event.TypedGenericEvent[string]

	mu sync.Mutex
	// ctx is the context of Start while it runs; nil before it, and after
	// it, when stopped is set.
	ctx     context.Context
	stopped bool
	nodes   map[string]*node
	// holders maps each holder to the node it holds: a holder holds one.
	holders map[string]string
}

// node is one node's informer and how many hold it.
type node struct {
	informer cache.SharedIndexInformer
	holders  int
	// stop ends the informer; nil until it runs.
	stop context.CancelFunc
}

// New returns a Cache whose informers newInformer makes, each with transform
// (nil keeps the pods whole).
func New(newInformer NewInformer, transform cache.TransformFunc) *Cache {
	return &Cache{
		newInformer: newInformer,
		transform:   transform,
		changes:     make(chan event.TypedGenericEvent[string]),
		nodes:       map[string]*node{},
		holders:     map[string]string{},
	}
}

// Changes names a node each time its pods changed, and once when its informer
// has synced (its first list is in).
func (c *Cache) Changes() <-chan event.TypedGenericEvent[string] { return c.changes }

// Start runs the informers held until ctx ends, then stops them all.
func (c *Cache) Start(ctx context.Context) error {
	c.mu.Lock()
	c.ctx = ctx
	for name, n := range c.nodes {
		c.run(name, n)
	}
	c.mu.Unlock()

	<-ctx.Done()

	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.stop != nil {
			n.stop()
		}
	}
	c.ctx, c.stopped = nil, true
	c.nodes, c.holders = map[string]*node{}, map[string]string{}
	return nil
}

// Hold starts the informer of nodeName's pods, unless it runs already, and
// holds it for holder until Release. A holder that held another node lets
// go of it.
func (c *Cache) Hold(holder, nodeName string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return
	}
	if held, ok := c.holders[holder]; ok {
		if held == nodeName {
			return
		}
		c.release(holder)
	}
	n, ok := c.nodes[nodeName]
	if !ok {
		n = &node{informer: c.newInformer(nodeName)}
		if c.transform != nil {
			// Only fails once the informer runs; it has not started.
			_ = n.informer.SetTransform(c.transform)
		}
		c.nodes[nodeName] = n
		if c.ctx != nil {
			c.run(nodeName, n)
		}
	}
	n.holders++
	c.holders[holder] = nodeName
}

// Warm holds nodeName's informer for holder until ttl has passed. The
// admission webhook warms the node of each create it admits, so that the
// informer's first list is in, or on its way, by the time the maintenance's
// first pass counts the node's pods: that pass holds the node itself, and
// the warm-up's end does not stop the informer then. A create the API
// server never stores, or one the controller queues (--max-unavailable),
// lets go of its node after ttl.
func (c *Cache) Warm(holder, nodeName string, ttl time.Duration) {
	c.Hold(holder, nodeName)
	time.AfterFunc(ttl, func() { c.Release(holder) })
}

// Release lets go of the node holder holds, if any; the node's informer
// stops with its last holder.
func (c *Cache) Release(holder string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.release(holder)
}

func (c *Cache) release(holder string) {
	name, ok := c.holders[holder]
	if !ok {
		return
	}
	delete(c.holders, holder)
	n := c.nodes[name]
	if n.holders--; n.holders > 0 {
		return
	}
	if n.stop != nil {
		n.stop()
	}
	delete(c.nodes, name)
}

// Pods returns the pods on nodeName, sorted by namespace and name, once its
// informer has synced, waiting for that until ctx ends. ok is false when
// the informer has not synced (or nobody holds the node): no answer, which
// is not the same as no pods. The pods are copies; the caller may change them.
func (c *Cache) Pods(ctx context.Context, nodeName string) (pods []corev1.Pod, ok bool) {
	c.mu.Lock()
	n := c.nodes[nodeName]
	c.mu.Unlock()
	if n == nil {
		return nil, false
	}
	select {
	case <-n.informer.HasSyncedChecker().Done():
	case <-ctx.Done():
		// Both may be ready: the sync wins.
		if !n.informer.HasSynced() {
			return nil, false
		}
	}
	objs := n.informer.GetStore().List()
	pods = make([]corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if pod, ok := o.(*corev1.Pod); ok {
			pods = append(pods, *pod.DeepCopy())
		}
	}
	slices.SortFunc(pods, func(a, b corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return pods, true
}

// run starts n's informer in the context of Start, with a handler that
// names the node on Changes for every change after the first list, and once
// when that list is in. Called with c.mu held.
func (c *Cache) run(name string, n *node) {
	ctx, stop := context.WithCancel(c.ctx)
	n.stop = stop
	changed := func() {
		select {
		case c.changes <- event.TypedGenericEvent[string]{Object: name}:
		case <-ctx.Done():
		}
	}
	// Only fails once the informer has stopped; it has not started.
	_, _ = n.informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, isInInitialList bool) {
			if !isInInitialList {
				changed()
			}
		},
		UpdateFunc: func(_, _ any) { changed() },
		DeleteFunc: func(_ any) { changed() },
	})
	go n.informer.RunWithContext(ctx)
	go func() {
		select {
		case <-n.informer.HasSyncedChecker().Done():
			changed()
		case <-ctx.Done():
		}
	}()
}
