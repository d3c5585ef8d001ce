package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/nodepods"
)

// listedPods is NodePods read straight from the fake client, listed at once:
// the tests that drive passes one by one need each pass to see what the last
// one evicted. It records who holds which node. The informers themselves are
// nodepods' to test; TestReconcileNeverPlansFromPodsNotListedYet drives the
// reconciler with them.
type listedPods struct {
	c    client.Reader
	held map[string]string // holder → node
}

func (p *listedPods) Hold(holder, node string) { p.held[holder] = node }
func (p *listedPods) Release(holder string)    { delete(p.held, holder) }

func (p *listedPods) Changes() <-chan event.TypedGenericEvent[string] { return nil }

func (p *listedPods) Pods(ctx context.Context, node string) ([]corev1.Pod, bool) {
	list := &corev1.PodList{}
	if err := p.c.List(ctx, list, client.MatchingFields{nodepods.NodeNameField: node}); err != nil {
		return nil, false
	}
	return list.Items, true
}

// gatedPodAPI serves the pod informers of nodepods from the fake client: a
// list the test lets through (open), and a watch the test sends events on.
type gatedPodAPI struct {
	c    client.Reader
	open chan struct{}

	mu      sync.Mutex
	watcher *watch.FakeWatcher
}

// listWatchOnly is a ListWatch that does not stream a watch's initial list.
type listWatchOnly struct{ *cache.ListWatch }

func (listWatchOnly) IsWatchListSemanticsUnSupported() bool { return true }

func (a *gatedPodAPI) informer(node string) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(listWatchOnly{&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			select {
			case <-a.open:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			list := &corev1.PodList{}
			if err := a.c.List(ctx, list, client.MatchingFields{nodepods.NodeNameField: node}); err != nil {
				return nil, err
			}
			list.ResourceVersion = "1"
			return list, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.watcher = watch.NewFake()
			return a.watcher, nil
		},
	}}, &corev1.Pod{}, 0, nil)
}

func (a *gatedPodAPI) watching() *watch.FakeWatcher {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.watcher
}

// waitForChangeOf waits until pods names node on Changes.
func waitForChangeOf(t *testing.T, pods *nodepods.Cache, node string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-pods.Changes():
			if ev.Object == node {
				return
			}
		case <-timeout:
			t.Fatalf("the informer of node %s never said it changed", node)
		}
	}
}

// The drain's safety: while the informer of the node's pods has not taken
// in its first list, its empty store must not make the node look drained. A
// pass ends with a short requeue before it records or cordons anything (the
// record counts the node's pods): no eviction, no pod counts, and above all
// no Succeeded. Once the list is in, the informer's sync wakes the
// maintenance and the next pass cordons and drains; the pod's deletion, seen
// by the informer, lets the drain succeed.
func TestReconcileNeverPlansFromPodsNotListedYet(t *testing.T) {
	e := newReconcileEnv(t, interceptor.Funcs{}, testObjects()...)
	var evicted []string
	e.evict = func(pod *corev1.Pod) error {
		evicted = append(evicted, pod.Namespace+"/"+pod.Name)
		return e.c.Delete(context.Background(), pod)
	}
	api := &gatedPodAPI{c: e.c, open: make(chan struct{})}
	pods := nodepods.New(api.informer, nil)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = pods.Start(ctx); close(stopped) }()
	t.Cleanup(func() { cancel(); <-stopped })
	e.r.Pods = pods

	for pass := 1; pass <= 2; pass++ {
		res := e.reconcile()
		nm := e.maintenance()
		if res.RequeueAfter != podsSyncRetry {
			t.Fatalf("pass %d before the first list: requeue after %v, want %v", pass, res.RequeueAfter, podsSyncRetry)
		}
		if nm.Status.Phase == nmv1beta1.MaintenanceSucceeded || nm.Status.TotalPods != 0 || nm.Status.EvictionPods != 0 || len(evicted) != 0 {
			t.Fatalf("pass %d before the first list decided from no answer: status %+v, evicted %v", pass, nm.Status, evicted)
		}
		if _, recorded := nm.Annotations[nodestate.PriorStateAnnotation]; recorded {
			t.Fatalf("pass %d before the first list wrote the prior-state record without the pods to count in it", pass)
		}
	}
	assertInMaintenance(t, e.node(), false)

	close(api.open)
	waitForChangeOf(t, pods, testNode)
	e.reconcile()
	nm := e.maintenance()
	if nm.Status.Phase != nmv1beta1.MaintenanceRunning || nm.Status.TotalPods != 1 || nm.Status.EvictionPods != 1 || len(evicted) != 1 || evicted[0] != "shop/web-1" {
		t.Fatalf("the pass after the first list: status %+v, evicted %v; want Running with shop/web-1 counted and evicted", nm.Status, evicted)
	}
	assertInMaintenance(t, e.node(), true)

	for api.watching() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	api.watching().Delete(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", UID: "pod-1", ResourceVersion: "2"}, Spec: corev1.PodSpec{NodeName: testNode}})
	waitForChangeOf(t, pods, testNode)
	e.reconcile()
	if nm := e.maintenance(); nm.Status.Phase != nmv1beta1.MaintenanceSucceeded {
		t.Fatalf("after web-1 left: status %+v, want Succeeded", nm.Status)
	}
}

// A maintenance holds its node's pods while it may drain, and lets go of
// them once it no longer reads them: Succeeded (keepMaintenance only holds
// the lease), Failed, deleted, or gone. A queued one never holds them.
func TestReconcileHoldsTheNodesPodsOnlyWhileDraining(t *testing.T) {
	holds := func(e *reconcileEnv, holder string) bool { _, ok := e.pods.held[holder]; return ok }

	t.Run("until Succeeded, and not again", func(t *testing.T) {
		e := newReconcileEnv(t, interceptor.Funcs{}, testObjects()...)
		e.evict = pdbRefusal
		e.reconcile()
		if e.pods.held[testNM] != testNode {
			t.Fatalf("held %v after the first pass, want %s holding %s", e.pods.held, testNM, testNode)
		}
		e.evict = nil
		for range 3 {
			e.reconcile()
		}
		if nm := e.maintenance(); nm.Status.Phase != nmv1beta1.MaintenanceSucceeded || holds(e, testNM) {
			t.Fatalf("phase %s, held %v; want Succeeded and nothing held", nm.Status.Phase, e.pods.held)
		}
		e.delete()
		e.reconcile()
		if !e.gone() || holds(e, testNM) {
			t.Fatalf("gone %v, held %v after the delete", e.gone(), e.pods.held)
		}
	})
	t.Run("until deleted while draining", func(t *testing.T) {
		e := newReconcileEnv(t, interceptor.Funcs{}, testObjects()...)
		e.evict = pdbRefusal
		e.reconcile()
		e.delete()
		e.reconcile()
		if !e.gone() || holds(e, testNM) {
			t.Fatalf("gone %v, held %v after the delete", e.gone(), e.pods.held)
		}
	})
	t.Run("until Failed", func(t *testing.T) {
		objs := testObjects()
		objs[1].(*nmv1beta1.NodeMaintenance).Spec.Drain = &nmv1beta1.DrainPolicy{Timeout: &metav1.Duration{Duration: time.Minute}}
		e := newReconcileEnv(t, interceptor.Funcs{}, objs...)
		e.evict = pdbRefusal
		e.reconcile()
		e.now = e.now.Add(2 * time.Minute)
		e.reconcile()
		e.reconcile()
		if nm := e.maintenance(); nm.Status.Phase != nmv1beta1.MaintenanceFailed || holds(e, testNM) {
			t.Fatalf("phase %s, held %v; want Failed and nothing held", nm.Status.Phase, e.pods.held)
		}
	})
	t.Run("not while queued, and forgotten when gone", func(t *testing.T) {
		e := queueEnv(t, interceptor.Funcs{})
		e.reconcileNamed("maintain-node01")
		e.reconcileNamed("maintain-node02")
		if !holds(e, "maintain-node01") || holds(e, "maintain-node02") {
			t.Fatalf("held %v; want maintain-node01's node only (maintain-node02 waits for a slot)", e.pods.held)
		}
		// Removed without its finalizer running: the pass finds it gone.
		nm := e.named("maintain-node01")
		nm.Finalizers = nil
		if err := e.c.Update(context.Background(), nm); err != nil {
			t.Fatal(err)
		}
		if err := e.c.Delete(context.Background(), nm, &client.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatal(err)
		}
		e.reconcileNamed("maintain-node01")
		if holds(e, "maintain-node01") {
			t.Fatalf("held %v after maintain-node01 is gone", e.pods.held)
		}
	})
}
