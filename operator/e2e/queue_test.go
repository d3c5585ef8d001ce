package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/controller"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// slotEvent is how fast a freed slot must be taken: well below the queue's
// one-minute backstop, so that only the NodeMaintenance watch can pass it.
const slotEvent = 20 * time.Second

// cordonWatch follows every change of a pool's nodes through a watch, so
// that no moment with too many nodes cordoned can slip between two polls,
// and records the most cordoned at once and the order of the cordons.
type cordonWatch struct {
	mu       sync.Mutex
	cordoned map[string]bool
	most     int
	order    []string
	err      error
	stop     context.CancelFunc
	done     chan struct{}
}

func watchCordons(t *testing.T, c *testcluster.Cluster, pool *testcluster.Pool) *cordonWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Clientset.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(pool.Selector()).String()})
	if err != nil {
		cancel()
		t.Fatalf("watch the pool's nodes: %v", err)
	}
	cw := &cordonWatch{cordoned: map[string]bool{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(cw.done)
		defer w.Stop()
		for ev := range w.ResultChan() {
			node, ok := ev.Object.(*corev1.Node)
			if !ok {
				if ev.Type == watch.Error && ctx.Err() == nil {
					cw.mu.Lock()
					cw.err = fmt.Errorf("the node watch ended with an error: %v", ev.Object)
					cw.mu.Unlock()
				}
				continue
			}
			cw.mu.Lock()
			now := node.Spec.Unschedulable && ev.Type != watch.Deleted
			if now && !cw.cordoned[node.Name] {
				cw.order = append(cw.order, node.Name)
			}
			cw.cordoned[node.Name] = now
			n := 0
			for _, c := range cw.cordoned {
				if c {
					n++
				}
			}
			cw.most = max(cw.most, n)
			cw.mu.Unlock()
		}
		if ctx.Err() == nil {
			cw.mu.Lock()
			cw.err = fmt.Errorf("the node watch ended early: a moment may have gone unseen")
			cw.mu.Unlock()
		}
	}()
	t.Cleanup(cw.end)
	return cw
}

func (cw *cordonWatch) end() {
	cw.stop()
	<-cw.done
}

func (cw *cordonWatch) result() (most int, order []string, err error) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	return cw.most, append([]string(nil), cw.order...), cw.err
}

func sortByCreation(nms []*nmv1beta1.NodeMaintenance) {
	sort.SliceStable(nms, func(i, j int) bool {
		a, b := nms[i], nms[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

func queuedCondition(nm *nmv1beta1.NodeMaintenance) *metav1.Condition {
	return meta.FindStatusCondition(nm.Status.Conditions, nmv1beta1.ConditionQueued)
}

// waitNoMaintenances waits until the tests before this one have cleaned up:
// the queue counts every NodeMaintenance in the cluster.
func waitNoMaintenances(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	testcluster.WaitFor(t, phaseTimeout, "no NodeMaintenance left by earlier tests", func(ctx context.Context) (bool, error) {
		list := &nmv1beta1.NodeMaintenanceList{}
		if err := c.Client.List(ctx, list); err != nil {
			return false, err
		}
		if len(list.Items) == 0 {
			return true, nil
		}
		var names []string
		for _, nm := range list.Items {
			names = append(names, nm.Name)
		}
		return false, fmt.Errorf("still there: %v", names)
	})
}

// With --max-unavailable=2 and the Queue policy, six NodeMaintenances
// created at once are all admitted; two start and four wait, their nodes
// untouched and without a lease, naming whom they wait for. Never more than
// two nodes are cordoned at any moment the node watch shows, each deletion
// lets the next one start at once, and they start in creation order
// (creationTimestamp, then name).
func TestMaxUnavailableQueue(t *testing.T) {
	c := testcluster.Get(t)
	waitNoMaintenances(t, c)
	o := defaultOptions()
	o.MaxUnavailable = "2"
	o.MaxUnavailablePolicy = validation.MaxUnavailableQueue
	restartOperator(t, c, o)

	pool := c.NewPool(t)
	nodes := map[string]string{} // NodeMaintenance -> node
	var nms []string
	for range 6 {
		node := pool.AddNode(t, "").Name
		name := "queue-" + node
		nodes[name] = node
		nms = append(nms, name)
	}
	cordons := watchCordons(t, c, pool)

	// All at once.
	var wg sync.WaitGroup
	errs := make([]error, len(nms))
	for i, name := range nms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Client.Create(bg(), &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: nodes[name]}})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create %s (the Queue policy admits every create beyond the limit): %v", nms[i], err)
		}
		name := nms[i]
		t.Cleanup(func() { deleteMaintenance(t, c, name) })
	}

	// Two start. Which two depends on the race of the creates: all six
	// carry the same creationTimestamp second, so the queue orders them by
	// name, but the operator decides for those it has seen, and the first
	// it sees may sort after one it has not seen yet. Once all six are seen
	// the order is fixed: the four others start in (creationTimestamp, name)
	// order. (TestMaxUnavailableQueueOrder shows the timestamp first.)
	var first []string
	testcluster.WaitFor(t, phaseTimeout, "two of six NodeMaintenances to succeed", func(ctx context.Context) (bool, error) {
		first = first[:0]
		for _, name := range nms {
			nm := &nmv1beta1.NodeMaintenance{}
			if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, nm); err != nil {
				return false, err
			}
			if nm.Status.Phase == nmv1beta1.MaintenanceSucceeded {
				first = append(first, name)
			}
		}
		if len(first) == 2 {
			return true, nil
		}
		return false, fmt.Errorf("succeeded: %v", first)
	})
	var rest []*nmv1beta1.NodeMaintenance
	for _, name := range nms {
		if name != first[0] && name != first[1] {
			rest = append(rest, getMaintenance(t, c, name))
		}
	}
	sortByCreation(rest)
	holders := []*nmv1beta1.NodeMaintenance{getMaintenance(t, c, first[0]), getMaintenance(t, c, first[1])}
	sortByCreation(holders)
	created := map[string]*nmv1beta1.NodeMaintenance{}
	var order []string
	for _, nm := range append(holders, rest...) {
		order = append(order, nm.Name)
		created[nm.Name] = nm
	}
	// behind names, in the queue's order, those a queued one waits for.
	behind := func(names []string) string {
		nms := make([]*nmv1beta1.NodeMaintenance, 0, len(names))
		for _, n := range names {
			nms = append(nms, created[n])
		}
		sortByCreation(nms)
		out := make([]string, len(nms))
		for i, nm := range nms {
			out[i] = nm.Name
		}
		return strings.Join(out, ", ")
	}
	t.Logf("started first: %v; queue order: %v", first, order)

	assertQueue := func(started int) {
		t.Helper()
		for _, name := range order[started : started+2] {
			waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
			assertInMaintenance(t, getNode(t, c, nodes[name]))
		}
		for i, name := range order[started+2:] {
			want := "queued behind " + behind(order[started:started+2+i]) + ": --max-unavailable=2"
			nm := waitMaintenance(t, c, name, "Running and Queued: "+want, func(nm *nmv1beta1.NodeMaintenance) bool {
				q := queuedCondition(nm)
				return q != nil && q.Status == metav1.ConditionTrue && q.Reason == nmv1beta1.ReasonWaitingForSlot &&
					strings.HasPrefix(q.Message, want) && nm.Status.Phase == nmv1beta1.MaintenanceRunning
			})
			if node := getNode(t, c, nodes[name]); node.Spec.Unschedulable || len(node.Spec.Taints) > 0 {
				t.Errorf("%s is queued but its node %s is cordoned or tainted: %+v", name, nodes[name], node.Spec)
			}
			if _, err := getLease(c, nodes[name]); err == nil {
				t.Errorf("%s is queued but holds the lease of node %s", name, nodes[name])
			}
			if _, ok := nm.Annotations[nodestate.PriorStateAnnotation]; ok {
				t.Errorf("%s is queued but recorded its node's state", name)
			}
		}
	}
	assertQueue(0)
	if body := scrape(t, operator.MetricsURL); !strings.Contains(body, "nodemaintenance_queued_maintenances 4") {
		t.Errorf("the metrics do not count 4 queued maintenances:\n%s", grepLines(body, "nodemaintenance_"))
	}
	testcluster.WaitFor(t, 30*time.Second, "a Queued event on "+order[2], func(ctx context.Context) (bool, error) {
		list := &eventsv1.EventList{}
		if err := c.Client.List(ctx, list); err != nil {
			return false, err
		}
		for _, e := range list.Items {
			if e.Reason == controller.ReasonQueued && e.Regarding.Name == order[2] && strings.Contains(e.Note, "queued behind") {
				return true, nil
			}
		}
		return false, nil
	})

	// Each deletion lets the next one start, promptly.
	for i := range 4 {
		deleteMaintenance(t, c, order[i])
		waitMaintenanceWithin(t, c, slotEvent, order[i+2], "started once "+order[i]+" was deleted", func(nm *nmv1beta1.NodeMaintenance) bool {
			q := queuedCondition(nm)
			return nm.Status.Phase == nmv1beta1.MaintenanceSucceeded && q != nil && q.Status == metav1.ConditionFalse && q.Reason == nmv1beta1.ReasonSlotAcquired
		})
		assertQueue(i + 1)
	}
	for _, name := range order[4:] {
		deleteMaintenance(t, c, name)
		assertRestored(t, getNode(t, c, nodes[name]))
	}

	cordons.end()
	most, cordonOrder, err := cordons.result()
	if err != nil {
		t.Fatal(err)
	}
	if most > 2 {
		t.Errorf("%d nodes were cordoned at once under --max-unavailable=2", most)
	}
	wantOrder := make([]string, len(order))
	for i, name := range order {
		wantOrder[i] = nodes[name]
	}
	// The first two start together, in either order.
	if len(cordonOrder) != len(wantOrder) ||
		!(cordonOrder[0] == wantOrder[0] && cordonOrder[1] == wantOrder[1] || cordonOrder[0] == wantOrder[1] && cordonOrder[1] == wantOrder[0]) ||
		strings.Join(cordonOrder[2:], ",") != strings.Join(wantOrder[2:], ",") {
		t.Errorf("nodes cordoned in the order %v, want the creation order %v", cordonOrder, wantOrder)
	}
	t.Logf("at most %d nodes cordoned at once; cordon order %v", most, cordonOrder)
}

// The queue is ordered by creation time, not by name: with
// --max-unavailable=1, three maintenances created a second apart, named
// against their creation order, start oldest first.
func TestMaxUnavailableQueueOrder(t *testing.T) {
	c := testcluster.Get(t)
	waitNoMaintenances(t, c)
	o := defaultOptions()
	o.MaxUnavailable = "1"
	restartOperator(t, c, o) // the default policy: Queue

	pool := c.NewPool(t)
	var order []string
	nodes := map[string]string{}
	for _, prefix := range []string{"order-c", "order-b", "order-a"} {
		node := pool.AddNode(t, "").Name
		name := prefix + "-" + node
		nodes[name] = node
		order = append(order, name)
	}
	cordons := watchCordons(t, c, pool)
	for i, name := range order {
		if i > 0 {
			// creationTimestamp has whole seconds.
			time.Sleep(1100 * time.Millisecond)
		}
		createMaintenance(t, c, name, nodes[name], "")
	}

	for i := range order {
		waitPhase(t, c, order[i], nmv1beta1.MaintenanceSucceeded)
		for j := i + 1; j < len(order); j++ {
			want := "queued behind " + strings.Join(order[i:j], ", ") + ": --max-unavailable=1"
			waitMaintenance(t, c, order[j], want, func(nm *nmv1beta1.NodeMaintenance) bool {
				q := queuedCondition(nm)
				return q != nil && q.Status == metav1.ConditionTrue && strings.HasPrefix(q.Message, want)
			})
		}
		deleteMaintenance(t, c, order[i])
	}

	cordons.end()
	most, cordonOrder, err := cordons.result()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{nodes[order[0]], nodes[order[1]], nodes[order[2]]}
	if most != 1 || strings.Join(cordonOrder, ",") != strings.Join(want, ",") {
		t.Errorf("at most %d nodes cordoned at once, in the order %v; want 1, in the creation order %v", most, cordonOrder, want)
	}
}

// grepLines keeps the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
