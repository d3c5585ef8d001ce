package nodepods

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// fakeAPI answers the informers of every node: a list that waits until
// the test lets it through (listed), and a watch the test sends events on.
type fakeAPI struct {
	pods map[string][]corev1.Pod // by node

	mu       sync.Mutex
	listed   map[string]chan struct{}
	watchers map[string]*watch.FakeWatcher
	// running counts the informers of each node whose list or watch is open.
	stopped map[string]int
}

func newFakeAPI(pods ...corev1.Pod) *fakeAPI {
	a := &fakeAPI{pods: map[string][]corev1.Pod{}, listed: map[string]chan struct{}{}, watchers: map[string]*watch.FakeWatcher{}, stopped: map[string]int{}}
	for _, p := range pods {
		a.pods[p.Spec.NodeName] = append(a.pods[p.Spec.NodeName], p)
	}
	return a
}

func (a *fakeAPI) gate(node string) chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.listed[node] == nil {
		a.listed[node] = make(chan struct{})
	}
	return a.listed[node]
}

// list lets node's list through.
func (a *fakeAPI) list(node string) { close(a.gate(node)) }

func (a *fakeAPI) watcher(node string) *watch.FakeWatcher {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.watchers[node]
}

func (a *fakeAPI) stops(node string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stopped[node]
}

// listWatchOnly is a ListWatch that does not stream a watch's initial list.
type listWatchOnly struct{ *cache.ListWatch }

func (listWatchOnly) IsWatchListSemanticsUnSupported() bool { return true }

func (a *fakeAPI) informer(node string) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			select {
			case <-a.gate(node):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: a.pods[node]}, nil
		},
		WatchFuncWithContext: func(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
			w := watch.NewFake()
			a.mu.Lock()
			a.watchers[node] = w
			a.mu.Unlock()
			go func() {
				<-ctx.Done()
				a.mu.Lock()
				a.stopped[node]++
				a.mu.Unlock()
			}()
			return w, nil
		},
	}
	return cache.NewSharedIndexInformer(listWatchOnly{lw}, &corev1.Pod{}, 0, nil)
}

func pod(node, ns, name string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: node}}
}

func startCache(t *testing.T, api *fakeAPI, transform cache.TransformFunc) *Cache {
	t.Helper()
	c := New(api.informer, transform)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

func shortly(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}

func names(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// waitForChange waits for Changes to name node.
func waitForChange(t *testing.T, c *Cache, node string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-c.Changes():
			if ev.Object == node {
				return
			}
		case <-timeout:
			t.Fatalf("no change of node %s named", node)
		}
	}
}

// The safety of the drain rests on this: until a node's first list is in,
// Pods gives no answer, never an empty list that would make the node look
// drained. Once it is in, Pods answers and Changes names the node.
func TestPodsOfANodeNotListedYetAreNoAnswer(t *testing.T) {
	api := newFakeAPI(pod("node-a", "shop", "web-2"), pod("node-a", "bank", "web-1"), pod("node-b", "shop", "db-1"))
	c := startCache(t, api, nil)

	if pods, ok := c.Pods(shortly(t), "node-a"); ok || pods != nil {
		t.Fatalf("Pods of a node nobody holds = %v, %v; want no answer", names(pods), ok)
	}
	c.Hold("maintain-a", "node-a")
	for range 3 {
		if pods, ok := c.Pods(shortly(t), "node-a"); ok || pods != nil {
			t.Fatalf("Pods before the first list = %v, %v; want no answer", names(pods), ok)
		}
	}

	api.list("node-a")
	waitForChange(t, c, "node-a")
	pods, ok := c.Pods(shortly(t), "node-a")
	if !ok {
		t.Fatal("Pods after the first list: no answer")
	}
	if got := names(pods); len(got) != 2 || got[0] != "bank/web-1" || got[1] != "shop/web-2" {
		t.Fatalf("Pods = %v, want node-a's two pods sorted", got)
	}
	pods[0].Name = "changed"
	if again, _ := c.Pods(shortly(t), "node-a"); again[0].Name != "web-1" {
		t.Fatal("changing a pod Pods returned changed the cache")
	}
}

// Pods waits for the first list until its context ends.
func TestPodsWaitsForTheFirstList(t *testing.T) {
	api := newFakeAPI(pod("node-a", "shop", "web-1"))
	c := startCache(t, api, nil)
	c.Hold("maintain-a", "node-a")
	go func() {
		time.Sleep(50 * time.Millisecond)
		api.list("node-a")
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if pods, ok := c.Pods(ctx, "node-a"); !ok || len(pods) != 1 {
		t.Fatalf("Pods = %v, %v; want the list that came in while it waited", names(pods), ok)
	}
}

// A pod's change after the first list names its node on Changes, and is in
// the next answer.
func TestChangesNameTheNodeOfAChangedPod(t *testing.T) {
	api := newFakeAPI(pod("node-a", "shop", "web-1"))
	c := startCache(t, api, nil)
	c.Hold("maintain-a", "node-a")
	api.list("node-a")
	waitForChange(t, c, "node-a")

	for api.watcher("node-a") == nil {
		time.Sleep(10 * time.Millisecond)
	}
	gone := pod("node-a", "shop", "web-1")
	api.watcher("node-a").Delete(&gone)
	waitForChange(t, c, "node-a")
	if pods, ok := c.Pods(shortly(t), "node-a"); !ok || len(pods) != 0 {
		t.Fatalf("Pods after the delete = %v, %v; want none", names(pods), ok)
	}
}

// A node's informer runs while anyone holds it: the second holder shares it,
// and it stops with the last Release. Holding another node lets go of the
// first.
func TestNodeInformerStopsWithItsLastHolder(t *testing.T) {
	api := newFakeAPI(pod("node-a", "shop", "web-1"))
	api.list("node-a")
	api.list("node-b")
	c := startCache(t, api, nil)
	c.Hold("maintain-a", "node-a")
	c.Hold("maintain-a-again", "node-a")
	waitForChange(t, c, "node-a")
	for api.watcher("node-a") == nil {
		time.Sleep(10 * time.Millisecond)
	}

	c.Release("maintain-a")
	c.Release("nobody")
	if _, ok := c.Pods(shortly(t), "node-a"); !ok {
		t.Fatal("node-a's pods are gone while maintain-a-again holds them")
	}
	c.Hold("maintain-a-again", "node-b") // lets go of node-a
	if _, ok := c.Pods(shortly(t), "node-a"); ok {
		t.Fatal("node-a's pods still answer after their last holder let go")
	}
	deadline := time.Now().Add(10 * time.Second)
	for api.stops("node-a") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("node-a's watch still open after its last holder let go")
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitForChange(t, c, "node-b")
	c.Release("maintain-a-again")
	if _, ok := c.Pods(shortly(t), "node-b"); ok {
		t.Fatal("node-b's pods still answer after their last holder let go")
	}
}

// A node held before Start (the controller may reconcile before the cache
// runnable starts) is listed once Start runs; each pod goes through the
// transform.
func TestHeldBeforeStartAndTransformed(t *testing.T) {
	api := newFakeAPI(pod("node-a", "shop", "web-1"))
	api.list("node-a")
	c := New(api.informer, func(obj any) (any, error) {
		p := obj.(*corev1.Pod)
		p.Labels = nil
		return p, nil
	})
	c.Hold("maintain-a", "node-a")
	if _, ok := c.Pods(shortly(t), "node-a"); ok {
		t.Fatal("Pods answered before Start")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Start(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitForChange(t, c, "node-a")
	pods, ok := c.Pods(shortly(t), "node-a")
	if !ok || len(pods) != 1 || pods[0].Labels != nil {
		t.Fatalf("Pods = %+v, %v; want web-1 without its labels", pods, ok)
	}
}

// A node's informer lists the node's pods (the API server's watch cache
// answers from its index by node), then watches from the list's version: it
// never asks for one watch that streams the initial list, which the watch
// cache serves by checking every pod of the cluster.
func TestPodsOfListsThenWatchesTheNodesPods(t *testing.T) {
	clientset := fake.NewClientset()
	var selectors, versions []string
	clientset.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		selectors = append(selectors, a.(k8stesting.ListAction).GetListRestrictions().Fields.String())
		if o, ok := a.(k8stesting.ListActionImpl); ok {
			versions = append(versions, fmt.Sprintf("%q limit %d", o.ListOptions.ResourceVersion, o.ListOptions.Limit))
		}
		return false, nil, nil
	})
	lw := PodsOf(clientset, "node01")
	if !watchlist.DoesClientNotSupportWatchListSemantics(lw) {
		t.Error("the node's informer would stream its initial list in one watch, want a list then a watch")
	}
	informer := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("informer did not sync")
	}
	if len(selectors) != 1 || selectors[0] != "spec.nodeName=node01" {
		t.Errorf("lists with field selectors %q, want one list of spec.nodeName=node01", selectors)
	}
	// Consistent: a drain plans on it.
	if len(versions) != 1 || versions[0] != `"" limit 0` {
		t.Errorf("lists at resourceVersion and limit %v, want one consistent list without a limit", versions)
	}
}

// A warm-up starts the node's informer at once and lets go of it after its
// time: the informer stops then unless a maintenance holds the node.
func TestWarmHoldsTheNodeForItsTime(t *testing.T) {
	api := newFakeAPI(pod("node-a", "shop", "web-1"), pod("node-b", "shop", "db-1"))
	api.list("node-a")
	api.list("node-b")
	c := startCache(t, api, nil)
	const ttl = 200 * time.Millisecond
	c.Warm("admission/maintain-a", "node-a", ttl)
	c.Warm("admission/maintain-b", "node-b", ttl)
	c.Hold("maintain-b", "node-b") // the maintenance's first pass
	for _, node := range []string{"node-a", "node-b"} {
		if pods, ok := c.Pods(shortly(t), node); !ok || len(pods) != 1 {
			t.Fatalf("pods of the warmed %s: %v, %v; want its one pod", node, names(pods), ok)
		}
	}

	deadline := time.Now().Add(10 * time.Second)
	for api.stops("node-a") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("node-a's informer still runs after its warm-up ended, with nobody holding it")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := c.Pods(shortly(t), "node-a"); ok {
		t.Fatal("node-a's pods still answer after its warm-up ended")
	}
	if _, ok := c.Pods(shortly(t), "node-b"); !ok || api.stops("node-b") != 0 {
		t.Fatal("node-b's informer stopped with its warm-up, although maintain-b holds it")
	}
}
