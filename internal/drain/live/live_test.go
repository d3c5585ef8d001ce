package live

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// countReader answers every list with one item of total and records the
// options of each list.
type countReader struct {
	client.Reader
	total int64
	asked []client.ListOptions
}

func (r *countReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := client.ListOptions{}
	o.ApplyOptions(opts)
	r.asked = append(r.asked, o)
	list.(*corev1.PodList).Items = make([]corev1.Pod, 1)
	if r.total > 1 {
		list.SetContinue("more")
		list.SetRemainingItemCount(ptr.To(r.total - 1))
	}
	return nil
}

// A count asks for one item, consistently, or from the watch cache at any
// version not older than the first when the bounds say so: not at
// resourceVersion 0, for which the API server ignores the limit and sends
// every pod of the cluster.
func TestWithinCountsFromTheWatchCacheWhenAsked(t *testing.T) {
	for _, tt := range []struct {
		bounds       Bounds
		total        int64
		small        bool
		version      string
		versionMatch metav1.ResourceVersionMatch
	}{
		{Bounds{Pods: 500}, 500, true, "", ""},
		{Bounds{Pods: 500}, 501, false, "", ""},
		{Bounds{Pods: 500, FromWatchCache: true}, 500, true, "1", metav1.ResourceVersionMatchNotOlderThan},
		{Bounds{Pods: 500, FromWatchCache: true}, 501, false, "1", metav1.ResourceVersionMatchNotOlderThan},
	} {
		r := &countReader{total: tt.total}
		small, err := reader{r: r, b: tt.bounds}.within(context.Background(), &corev1.PodList{}, tt.bounds.Pods, client.InNamespace("ns"))
		if err != nil || small != tt.small {
			t.Errorf("%+v, %d pods: within %v %v, want %v", tt.bounds, tt.total, small, err, tt.small)
		}
		if len(r.asked) != 1 {
			t.Fatalf("%+v: %d lists, want 1", tt.bounds, len(r.asked))
		}
		o := r.asked[0]
		var version string
		var match metav1.ResourceVersionMatch
		if o.Raw != nil {
			version, match = o.Raw.ResourceVersion, o.Raw.ResourceVersionMatch
		}
		if o.Limit != 1 || o.Namespace != "ns" || version != tt.version || match != tt.versionMatch {
			t.Errorf("%+v: listed with limit %d, namespace %q, resourceVersion %q (%q); want limit 1 in ns at %q (%q)",
				tt.bounds, o.Limit, o.Namespace, version, match, tt.version, tt.versionMatch)
		}
	}
}

// AnyVersion asks for resourceVersion 0 on a list and on a get alike, and
// keeps the other options it is given with.
func TestAnyVersionOnListsAndGets(t *testing.T) {
	list := &client.ListOptions{}
	list.ApplyOptions([]client.ListOption{client.Limit(5), AnyVersion})
	if list.Raw == nil || list.Raw.ResourceVersion != "0" || list.Limit != 5 {
		t.Errorf("list options %+v, raw %+v: want resourceVersion 0 and the limit kept", list, list.Raw)
	}
	get := &client.GetOptions{}
	get.ApplyOptions([]client.GetOption{AnyVersion})
	if get.Raw == nil || get.Raw.ResourceVersion != "0" {
		t.Errorf("get options raw %+v: want resourceVersion 0", get.Raw)
	}
}
