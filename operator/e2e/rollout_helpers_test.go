package e2e

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// createRollout creates ro, and at cleanup deletes it and waits until it is
// gone (its finalizer restored every node it held).
func createRollout(t *testing.T, c *testcluster.Cluster, ro *nmv1alpha1.NodeMaintenanceRollout) {
	t.Helper()
	if err := c.Client.Create(bg(), ro); err != nil {
		t.Fatalf("create rollout %s: %v", ro.Name, err)
	}
	t.Cleanup(func() { deleteRollout(t, c, ro.Name) })
}

// deleteRollout deletes a rollout and waits until it is gone.
func deleteRollout(t *testing.T, c *testcluster.Cluster, name string) {
	t.Helper()
	ro := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Client.Delete(bg(), ro); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete rollout %s: %v", name, err)
		return
	}
	testcluster.WaitFor(t, 2*time.Minute, "rollout "+name+" to be gone", func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &nmv1alpha1.NodeMaintenanceRollout{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

func getRollout(t *testing.T, c *testcluster.Cluster, name string) *nmv1alpha1.NodeMaintenanceRollout {
	t.Helper()
	ro := &nmv1alpha1.NodeMaintenanceRollout{}
	if err := c.Client.Get(bg(), client.ObjectKey{Name: name}, ro); err != nil {
		t.Fatalf("get rollout %s: %v", name, err)
	}
	return ro
}

// waitRollout waits until cond holds for the rollout, and returns it.
func waitRollout(t *testing.T, c *testcluster.Cluster, timeout time.Duration, name, what string, cond func(*nmv1alpha1.NodeMaintenanceRollout) bool) *nmv1alpha1.NodeMaintenanceRollout {
	t.Helper()
	ro := &nmv1alpha1.NodeMaintenanceRollout{}
	testcluster.WaitFor(t, timeout, "rollout "+name+" "+what, func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, ro); err != nil {
			return false, err
		}
		if ro.Status.Phase == nmv1alpha1.RolloutHalted && what != "to halt" {
			t.Fatalf("rollout %s halted while the test waited for it %s: %s", name, what, ro.Status.Message)
		}
		return cond(ro), nil
	})
	return ro
}

func rolloutPhase(phase nmv1alpha1.RolloutPhase) func(*nmv1alpha1.NodeMaintenanceRollout) bool {
	return func(ro *nmv1alpha1.NodeMaintenanceRollout) bool { return ro.Status.Phase == phase }
}

func rowOf(ro *nmv1alpha1.NodeMaintenanceRollout, node string) nmv1alpha1.RolloutNode {
	for _, row := range ro.Status.Nodes {
		if row.Name == node {
			return row
		}
	}
	return nmv1alpha1.RolloutNode{}
}

func newRollout(t *testing.T, prefix string, spec nmv1alpha1.NodeMaintenanceRolloutSpec) *nmv1alpha1.NodeMaintenanceRollout {
	return &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: testcluster.UniqueName(t, prefix)}, Spec: spec}
}

// stepJob is a step that runs a pause container; kwok completes the pods
// of Jobs at once (its pod-complete stage).
func stepJob(ns string) *nmv1alpha1.RolloutStep {
	return &nmv1alpha1.RolloutStep{Namespace: ns, JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "step", Image: testcluster.PauseImage}}}},
	}}}
}

// serviceWatch watches the nodes of a set and the NodeMaintenances of
// their nodes for a whole rollout: the most nodes ever out of service at
// once (unschedulable, NotReady, or held by a NodeMaintenance), and the
// NodeMaintenance UIDs created for each node.
type serviceWatch struct {
	mu       sync.Mutex
	set      map[string]bool
	down     map[string]bool // unschedulable or NotReady
	held     map[string]map[string]bool
	created  map[string]map[string]bool // node → NodeMaintenance UIDs seen
	max      int
	maxAt    string
	stop     context.CancelFunc
	finished chan struct{}
}

// watchService starts a serviceWatch of nodes; stop it with done.
func watchService(t *testing.T, c *testcluster.Cluster, nodes []string) *serviceWatch {
	t.Helper()
	w := &serviceWatch{set: map[string]bool{}, down: map[string]bool{}, held: map[string]map[string]bool{}, created: map[string]map[string]bool{}, finished: make(chan struct{})}
	for _, n := range nodes {
		w.set[n] = true
	}
	ctx, cancel := context.WithCancel(bg())
	w.stop = cancel
	nodeWatch, err := c.Clientset.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	watcher, err := client.NewWithWatch(c.RESTConfig, client.Options{Scheme: testcluster.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	nmWatch, err := watcher.Watch(ctx, &nmv1beta1.NodeMaintenanceList{})
	if err != nil {
		t.Fatal(err)
	}
	go w.run(ctx, nodeWatch, nmWatch)
	t.Cleanup(w.done)
	return w
}

func (w *serviceWatch) run(ctx context.Context, nodes, nms watch.Interface) {
	defer close(w.finished)
	defer nodes.Stop()
	defer nms.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-nodes.ResultChan():
			if !ok {
				return
			}
			if n, isNode := ev.Object.(*corev1.Node); isNode && w.set[n.Name] {
				w.record(func() {
					w.down[n.Name] = ev.Type != watch.Deleted && (n.Spec.Unschedulable || !validation.NodeReady(n))
				}, "node "+n.Name)
			}
		case ev, ok := <-nms.ResultChan():
			if !ok {
				return
			}
			if nm, isNM := ev.Object.(*nmv1beta1.NodeMaintenance); isNM && w.set[nm.Spec.NodeName] {
				w.record(func() { w.holdChange(ev.Type, nm) }, "NodeMaintenance "+nm.Name)
			}
		}
	}
}

func (w *serviceWatch) holdChange(t watch.EventType, nm *nmv1beta1.NodeMaintenance) {
	node := nm.Spec.NodeName
	if w.held[node] == nil {
		w.held[node], w.created[node] = map[string]bool{}, map[string]bool{}
	}
	w.created[node][string(nm.UID)] = true
	if t == watch.Deleted {
		delete(w.held[node], string(nm.UID))
	} else {
		w.held[node][string(nm.UID)] = true
	}
}

func (w *serviceWatch) record(change func(), what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	change()
	out := 0
	for n := range w.set {
		if w.down[n] || len(w.held[n]) > 0 {
			out++
		}
	}
	if out > w.max {
		w.max, w.maxAt = out, fmt.Sprintf("%s at %s", what, time.Now().Format(time.StampMilli))
	}
}

func (w *serviceWatch) done() {
	w.stop()
	<-w.finished
}

// assertAtMostOutOfService: never more than limit nodes of the set were out
// of service at once, and at least one was (the watch saw the rollout).
func (w *serviceWatch) assertAtMostOutOfService(t *testing.T, limit int) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.max > limit {
		t.Errorf("%d nodes of the set were out of service at once (after %s), more than maxUnavailable %d", w.max, w.maxAt, limit)
	}
	if w.max == 0 {
		t.Errorf("the watch never saw a node of the set out of service")
	}
	t.Logf("at most %d nodes of the set were out of service at once (maxUnavailable %d)", w.max, limit)
}

// assertOneMaintenanceEach: each node was maintained through exactly one
// NodeMaintenance (one UID).
func (w *serviceWatch) assertOneMaintenanceEach(t *testing.T, nodes []string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range nodes {
		if len(w.created[n]) != 1 {
			t.Errorf("node %s was maintained through %d NodeMaintenances (UIDs %v), want 1", n, len(w.created[n]), w.created[n])
		}
	}
}

// poolNodes adds n nodes to a new pool, waits until each has settled, and
// returns their names (sorted, the order of a selector's set) and states.
func poolNodes(t *testing.T, c *testcluster.Cluster, n int) (*testcluster.Pool, []string, map[string]nodeState) {
	t.Helper()
	pool := c.NewPool(t)
	var names []string
	for range n {
		names = append(names, pool.AddNode(t, "").Name)
	}
	sort.Strings(names)
	states := map[string]nodeState{}
	for _, name := range names {
		states[name] = settledStateOf(t, c, name)
	}
	return pool, names, states
}

// assertRestoredAll: every node is as it was before the rollout.
func assertRestoredAll(t *testing.T, c *testcluster.Cluster, before map[string]nodeState) {
	t.Helper()
	for node, state := range before {
		assertSameNodeState(t, node, state, stateOf(t, c, node))
	}
}

// childrenOf lists the NodeMaintenances labelled with the rollout's name.
func childrenOf(t *testing.T, c *testcluster.Cluster, rollout string) []nmv1beta1.NodeMaintenance {
	t.Helper()
	list := &nmv1beta1.NodeMaintenanceList{}
	if err := c.Client.List(bg(), list, client.MatchingLabels{nmv1alpha1.RolloutLabel: rollout}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}
