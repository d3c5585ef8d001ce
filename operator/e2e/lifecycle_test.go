package e2e

// The node lifecycle conditions of KEP-5683 that the operator writes:
// MaintenanceInProgress, DrainInProgress and Drained on a maintained node,
// MaintenancePlanned on the nodes a rollout waits to maintain; and the
// exact restore of the node's conditions, a foreign one included.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// lifecycleType reports whether t is one of the lifecycle conditions of
// KEP-5683.
func lifecycleType(t corev1.NodeConditionType) bool {
	switch t {
	case corev1.NodeMaintenanceInProgress, corev1.NodeDrainInProgress, corev1.NodeDrained,
		corev1.NodeMaintenancePlanned, corev1.NodeGracefulNodeShutdownInProgress:
		return true
	}
	return false
}

// foreignCondition is a lifecycle condition as an admin writes it by hand,
// stamped a minute ago (to the second, as the API server keeps it).
func foreignCondition(typ corev1.NodeConditionType, status corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
	at := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
	return corev1.NodeCondition{Type: typ, Status: status, Reason: reason, Message: msg, LastHeartbeatTime: at, LastTransitionTime: at}
}

// setForeignCondition writes cond on the node's status as an admin would
// (kubectl patch --subresource=status), merged by type.
func setForeignCondition(t *testing.T, c *testcluster.Cluster, node string, cond corev1.NodeCondition) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{cond}}})
	if err != nil {
		t.Fatal(err)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := c.Client.Status().Patch(bg(), n, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		t.Fatalf("write condition %s on node %s: %v", cond.Type, node, err)
	}
}

// findCondition is the node's condition of typ, or nil.
func findCondition(n *corev1.Node, typ corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// ourConditions describes the node's lifecycle conditions the operator
// wrote: type=status(reason), sorted; for the messages of waits.
func ourConditions(n *corev1.Node) string {
	var b []string
	for _, cond := range conditionsOf(n) {
		if lifecycleType(cond.Type) && nodestate.Written(cond) {
			b = append(b, fmt.Sprintf("%s=%s(%s)", cond.Type, cond.Status, cond.Reason))
		}
	}
	return strings.Join(b, " ")
}

// waitOurConditions waits until the node's lifecycle conditions written by
// the operator are exactly want (ourConditions' form), and returns the node.
func waitOurConditions(t *testing.T, c *testcluster.Cluster, node, want string) *corev1.Node {
	t.Helper()
	var n *corev1.Node
	var last string
	testcluster.WaitFor(t, phaseTimeout, fmt.Sprintf("node %s's lifecycle conditions to be %q", node, want), func(ctx context.Context) (bool, error) {
		n = &corev1.Node{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return false, err
		}
		last = ourConditions(n)
		return last == want, nil
	})
	return n
}

// setPDBMaxUnavailable changes the budget's maxUnavailable.
func setPDBMaxUnavailable(t *testing.T, c *testcluster.Cluster, ns, name string, v int32) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := c.Client.Get(bg(), client.ObjectKey{Namespace: ns, Name: name}, pdb); err != nil {
			return err
		}
		pdb.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(v))
		return c.Client.Update(bg(), pdb)
	})
	if err != nil {
		t.Fatalf("set maxUnavailable %d on PodDisruptionBudget %s/%s: %v", v, ns, name, err)
	}
}

const (
	draining = "DrainInProgress=True(AdminRequested) Drained=False(DrainNotCompleted) MaintenanceInProgress=True(AdminRequested)"
	drained  = "DrainInProgress=False(DrainCompleted) Drained=True(DrainCompleted) MaintenanceInProgress=True(AdminRequested)"
)

// A maintained node says so in its lifecycle conditions, in order: while a
// budget holds the drain, MaintenanceInProgress and DrainInProgress True;
// once drained, DrainInProgress False and Drained True. A foreign Drained
// from before is written over during the maintenance and put back exactly
// by the restore; the node's other conditions are never touched, and after
// the deletion every condition is as it was.
func TestLifecycleConditionsFollowTheMaintenance(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	node := deploymentNode(t, c, ns, "held", 2, nil, ptr.To(intstr.FromInt32(0)))
	waitBudget(t, c, ns, "held", 2)
	foreign := foreignCondition(corev1.NodeDrained, corev1.ConditionFalse, "Cleared", "cleared by an admin before the maintenance")
	setForeignCondition(t, c, node, foreign)
	before := settledStateOf(t, c, node)

	name := testcluster.UniqueName(t, "lifecycle")
	createMaintenance(t, c, name, node, "")
	during := waitOurConditions(t, c, node, draining)
	if nm := getMaintenance(t, c, name); nm.Status.Phase != nmv1beta1.MaintenanceRunning || len(nm.Status.PendingPods) != 2 {
		t.Fatalf("the budget should hold the drain: phase %s, pending %v", nm.Status.Phase, nm.Status.PendingPods)
	}
	for _, cond := range during.Status.Conditions {
		if lifecycleType(cond.Type) && !strings.Contains(cond.Message, "NodeMaintenance "+name) {
			t.Errorf("condition %s's message %q does not name NodeMaintenance %s", cond.Type, cond.Message, name)
		}
	}
	assertKubeletConditionsKept(t, before.Conditions, during)

	setPDBMaxUnavailable(t, c, ns, "held", 1)
	waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
	assertKubeletConditionsKept(t, before.Conditions, waitOurConditions(t, c, node, drained))

	deleteMaintenance(t, c, name)
	after := getNode(t, c, node)
	if got := findCondition(after, corev1.NodeDrained); got == nil || !equality.Semantic.DeepEqual(*got, foreign) {
		t.Errorf("the foreign Drained condition is not back as it was:\ngot  %+v\nwant %+v", got, foreign)
	}
	assertSameNodeState(t, node, before, stateOf(t, c, node))
}

// assertKubeletConditionsKept: every condition of the node that is not a
// lifecycle condition is as before (heartbeats aside).
func assertKubeletConditionsKept(t *testing.T, before []corev1.NodeCondition, n *corev1.Node) {
	t.Helper()
	var want, got []corev1.NodeCondition
	for _, cond := range before {
		if !lifecycleType(cond.Type) {
			want = append(want, cond)
		}
	}
	for _, cond := range conditionsOf(n) {
		if !lifecycleType(cond.Type) {
			got = append(got, cond)
		}
	}
	if !equality.Semantic.DeepEqual(want, got) {
		t.Errorf("node %s's other conditions changed:\nbefore %+v\nnow    %+v", n.Name, want, got)
	}
}

// plannedBy reports whether the node carries MaintenancePlanned=True
// written by rollout ro.
func plannedBy(n *corev1.Node, ro string) bool {
	cond := findCondition(n, corev1.NodeMaintenancePlanned)
	return cond != nil && cond.Status == corev1.ConditionTrue && nodestate.Written(*cond) &&
		cond.Reason == nodestate.ReasonAdminRequested && strings.Contains(cond.Message, "NodeMaintenanceRollout "+ro+" ")
}

// heldRollout starts a rollout over a node whose drain a budget holds, then
// two more nodes, maxUnavailable 1; the last node carries a foreign
// MaintenancePlanned. It returns the nodes in order, their states from
// before, the foreign condition and the rollout, once the first node is in
// progress and the others wait.
func heldRollout(t *testing.T, c *testcluster.Cluster, ns string) ([]string, map[string]nodeState, corev1.NodeCondition, *nmv1alpha1.NodeMaintenanceRollout) {
	t.Helper()
	held := deploymentNode(t, c, ns, "held", 1, nil, ptr.To(intstr.FromInt32(0)))
	waitBudget(t, c, ns, "held", 1)
	_, others, _ := poolNodes(t, c, 2)
	nodes := append([]string{held}, others...)
	foreign := foreignCondition(corev1.NodeMaintenancePlanned, corev1.ConditionTrue, "ChangeBoard", "CHG-1234: planned by the change board")
	setForeignCondition(t, c, nodes[2], foreign)
	before := map[string]nodeState{}
	for _, n := range nodes {
		before[n] = settledStateOf(t, c, n)
	}
	ro := newRollout(t, "planned", nmv1alpha1.NodeMaintenanceRolloutSpec{
		NodeNames: nodes, MaxUnavailable: ptr.To(intstr.FromInt32(1)), Reason: "lifecycle conditions e2e",
	})
	createRollout(t, c, ro)
	// The first node started (its drain held), the second waits, planned;
	// the third keeps the foreign condition, not written over.
	testcluster.WaitFor(t, phaseTimeout, "node "+nodes[0]+" started without MaintenancePlanned, node "+nodes[1]+" planned", func(ctx context.Context) (bool, error) {
		r := getRollout(t, c, ro.Name)
		if rowOf(r, nodes[0]).State != nmv1alpha1.NodeDraining || rowOf(r, nodes[1]).State != nmv1alpha1.NodeWaiting {
			return false, nil
		}
		return !plannedBy(getNode(t, c, nodes[0]), ro.Name) && plannedBy(getNode(t, c, nodes[1]), ro.Name), nil
	})
	assertForeignPlanned(t, c, nodes[2], foreign)
	return nodes, before, foreign, ro
}

func assertForeignPlanned(t *testing.T, c *testcluster.Cluster, node string, foreign corev1.NodeCondition) {
	t.Helper()
	if got := findCondition(getNode(t, c, node), corev1.NodeMaintenancePlanned); got == nil || !equality.Semantic.DeepEqual(*got, foreign) {
		t.Errorf("node %s's foreign MaintenancePlanned changed:\ngot  %+v\nwant %+v", node, got, foreign)
	}
}

// A rollout of three nodes, maxUnavailable 1: the Waiting nodes carry
// MaintenancePlanned=True, a node's maintenance takes it off in the write
// that first says MaintenanceInProgress (every version of the node says
// one of the two, never both, while it starts), and none has it
// once the rollout succeeded; a foreign MaintenancePlanned is left as it
// is, and every node ends as it was.
func TestRolloutMaintenancePlanned(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	nodes, before, foreign, ro := heldRollout(t, c, ns)
	seen := watchOurConditions(t, c, nodes[1])
	setPDBMaxUnavailable(t, c, ns, "held", 1)
	// The second node starts next and loses the condition.
	testcluster.WaitFor(t, 2*phaseTimeout, "node "+nodes[1]+" started without MaintenancePlanned", func(ctx context.Context) (bool, error) {
		if rowOf(getRollout(t, c, ro.Name), nodes[1]).State == nmv1alpha1.NodeWaiting {
			return false, nil
		}
		return !plannedBy(getNode(t, c, nodes[1]), ro.Name), nil
	})
	waitRollout(t, c, 2*time.Minute, ro.Name, "to succeed", rolloutPhase(nmv1alpha1.RolloutSucceeded))
	assertHandedOver(t, nodes[1], seen())
	for _, n := range nodes {
		if ours := ourConditions(getNode(t, c, n)); ours != "" {
			t.Errorf("node %s still carries the operator's lifecycle conditions after the rollout: %s", n, ours)
		}
	}
	assertForeignPlanned(t, c, nodes[2], foreign)
	assertRestoredAll(t, c, before)
}

// watchOurConditions watches the node from its current version on, and
// returns what collects the operator's lifecycle conditions of every
// version the watch saw (ourConditions' form), a change at a time: a watch
// from a resourceVersion misses none of the node's versions.
func watchOurConditions(t *testing.T, c *testcluster.Cluster, node string) (seen func() []string) {
	t.Helper()
	n := getNode(t, c, node)
	ctx, cancel := context.WithCancel(bg())
	w, err := c.Clientset.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + node, ResourceVersion: n.ResourceVersion})
	if err != nil {
		cancel()
		t.Fatalf("watch node %s: %v", node, err)
	}
	var mu sync.Mutex
	states := []string{ourConditions(n)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			got, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			mu.Lock()
			if state := ourConditions(got); state != states[len(states)-1] {
				states = append(states, state)
			}
			mu.Unlock()
		}
	}()
	stop := func() {
		cancel()
		w.Stop()
		<-done
	}
	t.Cleanup(stop)
	return func() []string {
		stop()
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(states)
	}
}

// assertHandedOver checks the node's lifecycle conditions, in the order
// its versions said them, for the handover of MaintenancePlanned from the
// rollout to the node's maintenance: planned in every version until the
// first that says MaintenanceInProgress, and that one and the later ones
// no longer planned. A node that went from planned to neither, or that
// said both, fails.
func assertHandedOver(t *testing.T, node string, states []string) {
	t.Helper()
	first := slices.IndexFunc(states, func(s string) bool { return strings.Contains(s, string(corev1.NodeMaintenanceInProgress)+"=True") })
	if first < 0 {
		t.Fatalf("node %s never said MaintenanceInProgress; its lifecycle conditions went %q", node, states)
	}
	for i, s := range states {
		if planned := strings.Contains(s, string(corev1.NodeMaintenancePlanned)+"=True"); planned != (i < first) {
			t.Fatalf("node %s: MaintenancePlanned is not handed over to MaintenanceInProgress in one write; its lifecycle conditions went %q", node, states)
		}
	}
	t.Logf("node %s's lifecycle conditions went %q", node, states)
}

// A rollout deleted mid-way takes its MaintenancePlanned off the nodes it
// no longer plans, and its children's restore gives every node back as it
// was, a foreign MaintenancePlanned included.
func TestRolloutDeletedClearsMaintenancePlanned(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	nodes, before, foreign, ro := heldRollout(t, c, ns)
	deleteRollout(t, c, ro.Name)
	for _, n := range nodes {
		if ours := ourConditions(getNode(t, c, n)); ours != "" {
			t.Errorf("node %s still carries the operator's lifecycle conditions after its rollout was deleted: %s", n, ours)
		}
	}
	assertForeignPlanned(t, c, nodes[2], foreign)
	assertRestoredAll(t, c, before)
}

// testRealNodeLifecycleConditions maintains a kubelet-run node: its
// lifecycle conditions are there once it is drained, and still there after
// the kubelet posted its node status at least twice (the Ready condition's
// heartbeat moved on twice, two periods or more); the restore removes them,
// and the node's lifecycle conditions are as before.
func testRealNodeLifecycleConditions(t *testing.T, c *testcluster.Cluster, real *testcluster.RealNode) {
	before := getNode(t, c, real.Name)
	name := "lifecycle-" + real.Name
	nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: real.Name, Reason: "real node lifecycle conditions e2e", Drain: &nmv1beta1.DrainPolicy{AllowLastSchedulableNode: true}}}
	if err := c.Client.Create(bg(), nm); err != nil {
		t.Fatalf("create NodeMaintenance %s for node %s: %v", name, real.Name, err)
	}
	t.Cleanup(func() { deleteMaintenance(t, c, name) })
	waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
	marked := waitOurConditions(t, c, real.Name, drained)
	first := findCondition(marked, corev1.NodeReady).LastHeartbeatTime.Time
	posts := map[time.Time]bool{}
	want := first.Add(2 * testcluster.NodeStatusUpdateFrequency)
	testcluster.WaitFor(t, time.Minute, fmt.Sprintf("the kubelet of %s to post its status twice, %s or more apart from %s", real.Name, 2*testcluster.NodeStatusUpdateFrequency, first), func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: real.Name}, n); err != nil {
			return false, err
		}
		if got := ourConditions(n); got != drained {
			return false, fmt.Errorf("after %d status posts of the kubelet, the node's lifecycle conditions are %q, want %q", len(posts), got, drained)
		}
		hb := findCondition(n, corev1.NodeReady).LastHeartbeatTime.Time
		if hb.After(first) {
			posts[hb] = true
		}
		return len(posts) >= 2 && !hb.Before(want), nil
	})
	t.Logf("node %s: the kubelet posted its status %d times (Ready heartbeat %s to %s); the lifecycle conditions stayed: %s",
		real.Name, len(posts), first.Format(time.TimeOnly), want.Format(time.TimeOnly), drained)
	deleteMaintenance(t, c, name)
	after := getNode(t, c, real.Name)
	if ours := ourConditions(after); ours != "" {
		t.Errorf("the restore left the operator's lifecycle conditions on node %s: %s", real.Name, ours)
	}
	lifecycle := func(n *corev1.Node) []corev1.NodeCondition {
		var out []corev1.NodeCondition
		for _, cond := range conditionsOf(n) {
			if lifecycleType(cond.Type) {
				out = append(out, cond)
			}
		}
		return out
	}
	if !equality.Semantic.DeepEqual(lifecycle(before), lifecycle(after)) {
		t.Errorf("node %s's lifecycle conditions are not as before:\nbefore %+v\nafter  %+v", real.Name, lifecycle(before), lifecycle(after))
	}
	assertNodeAsBefore(t, before, after)
}
