package webhook

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain/live"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/nodeguard"
)

func testScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = nmv1beta1.AddToScheme(scheme)
	return scheme
}

// With an informer cache, the first decision reads the NodeMaintenances
// there: an admission makes no live list of them. A refusal the cache
// suggests (a maintenance it still shows, although it is gone) is decided
// again on a consistent list; a cache that cannot answer gives way to the
// API server's watch cache.
func TestValidateCreateDecidesOnTheInformerCache(t *testing.T) {
	scheme := testScheme()
	var watchCacheLists, consistentLists int
	apiServer := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(readyNode("node01"), readyNode("node02"), readyNode("node03")).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*nmv1beta1.NodeMaintenanceList); ok {
				o := &client.ListOptions{}
				o.ApplyOptions(opts)
				if o.Raw != nil && o.Raw.ResourceVersion == "0" {
					watchCacheLists++
				} else {
					consistentLists++
				}
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	var cacheDown bool
	cache := fake.NewClientBuilder().WithScheme(scheme).
		WithRuntimeObjects(readyNode("node01"), readyNode("node02"), readyNode("node03"), nm("gone", "node01")).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*nmv1beta1.NodeMaintenanceList); ok && cacheDown {
				return errors.New("the cache is not started")
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	v := &Validator{Reader: apiServer, Writer: apiServer, Cache: cache}
	ctx := context.Background()

	if _, err := v.ValidateCreate(ctx, nm("free", "node02")); err != nil {
		t.Fatalf("create for node02: %v", err)
	}
	if watchCacheLists+consistentLists != 0 {
		t.Errorf("an admission listed the NodeMaintenances live %d times, want none (the cache answers)", watchCacheLists+consistentLists)
	}
	if _, err := v.ValidateCreate(ctx, nm("again", "node01")); err != nil {
		t.Fatalf("create for node01 refused on the cache's stale view: %v", err)
	}
	if consistentLists != 1 {
		t.Errorf("%d consistent lists, want 1 to confirm the refusal the cache suggested", consistentLists)
	}
	// node02 is held by the ledger's entry for "free", whichever list is read.
	if _, err := v.ValidateCreate(ctx, nm("twice", "node02")); err == nil || !strings.Contains(err.Error(), `by NodeMaintenance "free"`) {
		t.Fatalf("second create for node02: %v, want it refused", err)
	}
	cacheDown = true
	watchCacheLists = 0
	if _, err := v.ValidateCreate(ctx, nm("third", "node03")); err != nil {
		t.Fatalf("create for node03 with the cache down: %v", err)
	}
	if watchCacheLists != 1 {
		t.Errorf("%d lists of the API server's watch cache with the informer cache down, want 1", watchCacheLists)
	}
}

// In a cluster beyond the preview's bound of nodes, the guard reads at most
// the bound and one more, then two schedulable nodes from the index, not
// every node; every node only for a refusal, which names them.
func TestGuardReadsTwoSchedulableNodesInALargeCluster(t *testing.T) {
	saved := PreviewBounds
	t.Cleanup(func() { PreviewBounds = saved })
	PreviewBounds.Nodes = 2

	cordoned := readyNode("node02")
	cordoned.Spec.Unschedulable = true
	tainted := readyNode("node04")
	tainted.Spec.Taints = []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}
	var lists []client.ListOptions
	newCache := func(nodes ...client.Object) client.Client {
		lists = nil
		return fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(nodes...).
			WithIndex(&corev1.Node{}, nodeguard.SchedulableIndex, nodeguard.Schedulable).
			WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
			WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if _, ok := list.(*corev1.NodeList); ok {
					o := client.ListOptions{}
					o.ApplyOptions(opts)
					lists = append(lists, o)
				}
				return c.List(ctx, list, opts...)
			}}).Build()
	}

	cache := newCache(readyNode("node01"), cordoned, readyNode("node03"), tainted)
	v := &Validator{Reader: cache, Writer: cache, Cache: cache}
	known, err := v.checkCreate(context.Background(), nm("a", "node01"))
	if err != nil {
		t.Fatalf("node03 takes pods, yet: %v", err)
	}
	if len(lists) != 2 || lists[0].Limit != 3 || lists[1].Limit != 2 || lists[1].FieldSelector.String() != nodeguard.SchedulableIndex+"=true" {
		t.Errorf("node lists %+v, want one of at most 3 nodes, then one of 2 schedulable ones", lists)
	}
	// The preview learns that the cluster is beyond its bound, without a count.
	if int64(len(known.Nodes)) <= PreviewBounds.Nodes {
		t.Errorf("the preview got %d nodes, want more than the bound of %d", len(known.Nodes), PreviewBounds.Nodes)
	}
	in, err := live.ReadFor(context.Background(), cache, known, PreviewBounds)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(in.NoCapacity, "more than 2 nodes") {
		t.Errorf("preview's NoCapacity %q, want the cluster beyond the bound of nodes", in.NoCapacity)
	}

	cache = newCache(readyNode("node01"), cordoned, readyNode("node03"), tainted)
	v = &Validator{Reader: cache, Writer: cache, Cache: cache}
	_, err = v.ValidateCreate(context.Background(), nm("b", "node03"))
	if err != nil {
		t.Fatalf("node01 takes pods, yet: %v", err)
	}

	cache = newCache(readyNode("node01"), cordoned, tainted)
	v = &Validator{Reader: cache, Writer: cache, Cache: cache}
	_, err = v.ValidateCreate(context.Background(), nm("c", "node01"))
	if err == nil || !strings.Contains(err.Error(), "no other node takes pods: node02 (cordoned), node04 (tainted dedicated:NoSchedule)") {
		t.Fatalf("node01 is the last schedulable node, yet: %v", err)
	}
	if len(lists) != 3 || lists[2].Limit != 0 || lists[2].FieldSelector != nil {
		t.Errorf("node lists %+v, want a last one of every node for the refusal's message", lists)
	}
}
