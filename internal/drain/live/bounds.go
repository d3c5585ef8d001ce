package live

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// This file holds how a preview reads within its bounds: the bounds, the
// options that read the API server's watch cache, and the reader's list,
// get and count. live.go holds what the preview reads, round by round.

// Bounds limit what a preview lists beyond the node's own pods, for callers
// on a hot path (the admission webhook): a cluster with more nodes or pods
// than that gets no capacity estimate, and costs two lists of one item
// instead of the lists of every node and pod. Zero is no bound.
type Bounds struct {
	Nodes, Pods int64
	// FromWatchCache reads the lists and the counts that bound them from the
	// API server's watch cache, which answers at once, instead of
	// consistently: a consistent list waits for the cache to catch up with
	// etcd, up to about 100 ms on kube-apiserver 1.37 whenever something
	// else was written since the kind's last change (make bench's
	// BENCH_TRACE shows it). The full lists ask for resourceVersion 0
	// (AnyVersion), the counts for any version not older than the first
	// (cacheCount), for which the cache keeps the limit of one item. For
	// the webhook, whose preview is advice: the cache is at most moments
	// behind.
	FromWatchCache bool
}

// HotPath are the bounds of a preview on a path that must stay cheap in a
// cluster of any size: the webhook's, on every create, and the plan of a
// rollout, which previews up to 20 nodes for their blockers. The room on
// the other nodes is estimated only in a cluster of at most 50 nodes and
// 500 pods; beyond that a preview reads the node's pods and what their
// namespaces' budgets and workloads say, not every node and pod.
var HotPath = Bounds{Nodes: 50, Pods: 500, FromWatchCache: true}

// AnyVersion is a list or get option that reads from the API server's watch
// cache (resourceVersion 0): the answer comes at once, as of moments ago,
// without waiting for the cache to catch up with etcd. The API server
// ignores a list's limit with it.
var AnyVersion = anyVersion{}

type anyVersion struct{}

var (
	_ client.ListOption = anyVersion{}
	_ client.GetOption  = anyVersion{}
)

func (anyVersion) ApplyToList(o *client.ListOptions) {
	if o.Raw == nil {
		o.Raw = &metav1.ListOptions{}
	}
	o.Raw.ResourceVersion = "0"
}

func (anyVersion) ApplyToGet(o *client.GetOptions) {
	if o.Raw == nil {
		o.Raw = &metav1.GetOptions{}
	}
	o.Raw.ResourceVersion = "0"
}

// cacheCount is the list option of a count (a list of one item) from the
// watch cache: any version not older than the first, which the cache has,
// so it answers at once with what it holds. Unlike resourceVersion 0, which
// makes the cache ignore the limit and send every item, this keeps the
// limit, and the answer's remainingItemCount says how many more there are.
var cacheCount client.ListOption = notOlderThanFirst{}

type notOlderThanFirst struct{}

func (notOlderThanFirst) ApplyToList(o *client.ListOptions) {
	if o.Raw == nil {
		o.Raw = &metav1.ListOptions{}
	}
	o.Raw.ResourceVersion, o.Raw.ResourceVersionMatch = "1", metav1.ResourceVersionMatchNotOlderThan
}

// reader reads a preview's inputs within its bounds.
type reader struct {
	r client.Reader
	b Bounds
}

// list lists everything of a kind (no limit), from the watch cache when the
// bounds say so.
func (rd reader) list(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	if rd.b.FromWatchCache {
		opts = append(opts, AnyVersion)
	}
	return rd.r.List(ctx, l, opts...)
}

// get reads one object, from the watch cache when the bounds say so.
func (rd reader) get(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	var opts []client.GetOption
	if rd.b.FromWatchCache {
		opts = append(opts, AnyVersion)
	}
	return rd.r.Get(ctx, key, obj, opts...)
}

// within reports whether the API server holds at most max objects of the
// list's kind, from a list of one: the rest is its remainingItemCount. Zero
// is no bound. The count is consistent, or from the watch cache when the
// bounds say so (cacheCount).
func (rd reader) within(ctx context.Context, list client.ObjectList, max int64, opts ...client.ListOption) (bool, error) {
	if max == 0 {
		return true, nil
	}
	if rd.b.FromWatchCache {
		opts = append(opts, cacheCount)
	}
	if err := rd.r.List(ctx, list, append(opts, client.Limit(1))...); err != nil {
		return false, err
	}
	if list.GetContinue() == "" {
		return true, nil
	}
	rest := list.GetRemainingItemCount()
	return rest != nil && *rest+1 <= max, nil
}
