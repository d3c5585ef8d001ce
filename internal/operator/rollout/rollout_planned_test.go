package rollout

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
)

// The reason says why the node is planned: a window, or an admin's request.
func TestPlannedReason(t *testing.T) {
	ro := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "ro"}}
	if c := planned(ro, 2); c.Reason != nodestate.ReasonAdminRequested || c.Status != corev1.ConditionTrue || !nodestate.Written(c) {
		t.Errorf("without a window: %+v", c)
	}
	ro.Spec.Window = &nmv1alpha1.MaintenanceWindow{}
	if c := planned(ro, 2); c.Reason != nodestate.ReasonMaintenanceWindow {
		t.Errorf("with a window: reason %s, want %s", c.Reason, nodestate.ReasonMaintenanceWindow)
	}
}

// setPlanned writes and removes this rollout's MaintenancePlanned, writes
// nothing when it is there already, and never changes one that someone
// else (an admin, another rollout) wrote.
func TestSetPlannedLeavesForeignConditions(t *testing.T) {
	ro := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "ro"}}
	admin := corev1.NodeCondition{Type: corev1.NodeMaintenancePlanned, Status: corev1.ConditionTrue, Reason: "ChangeBoard", Message: "CHG-1"}
	other := planned(&nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "ro-2"}}, 1)
	withPlanned := func(name string, c corev1.NodeCondition) *corev1.Node {
		n := readyNode(name)
		n.Status.Conditions = append(n.Status.Conditions, c)
		return n
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).
		WithObjects(readyNode("free"), withPlanned("admin", admin), withPlanned("other", other)).
		WithStatusSubresource(&corev1.Node{}).Build()
	r := &RolloutReconciler{Client: c, APIReader: c}
	ctx := context.Background()
	get := func(name string) *corev1.Node {
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, name := range []string{"free", "admin", "other"} {
		if err := r.setPlanned(ctx, ro, nmv1alpha1.RolloutNode{Name: name, Wave: 2}, true); err != nil {
			t.Fatal(err)
		}
	}
	free := get("free")
	if got := plannedOf(free, corev1.NodeMaintenancePlanned); got == nil || got.Message != planned(ro, 2).Message || got.LastTransitionTime.IsZero() {
		t.Errorf("free node: MaintenancePlanned %+v, want %+v stamped", got, planned(ro, 2))
	}
	if err := r.setPlanned(ctx, ro, nmv1alpha1.RolloutNode{Name: "free", Wave: 2}, true); err != nil {
		t.Fatal(err)
	}
	if again := get("free"); again.ResourceVersion != free.ResourceVersion {
		t.Error("a second pass wrote the same condition again")
	}
	for _, name := range []string{"free", "admin", "other", "gone"} {
		if err := r.setPlanned(ctx, ro, nmv1alpha1.RolloutNode{Name: name}, false); err != nil {
			t.Fatal(err)
		}
	}
	if got := plannedOf(get("free"), corev1.NodeMaintenancePlanned); got != nil {
		t.Errorf("this rollout's MaintenancePlanned was not removed: %+v", got)
	}
	for name, want := range map[string]corev1.NodeCondition{"admin": admin, "other": other} {
		if got := plannedOf(get(name), corev1.NodeMaintenancePlanned); got == nil || !equality.Semantic.DeepEqual(*got, want) {
			t.Errorf("node %s: someone else's MaintenancePlanned changed to %+v, was %+v", name, got, want)
		}
	}
}

func plannedOf(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// markPlanned plans the Waiting nodes, leaves a Draining node's
// MaintenancePlanned to its child (which takes it off when it first says
// MaintenanceInProgress), and takes it off every other node; once the
// rollout halts, off every node, the Draining ones included.
func TestMarkPlannedHandsADrainingNodeToItsChild(t *testing.T) {
	ro := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "ro"}}
	rows := []nmv1alpha1.RolloutNode{
		{Name: "waiting", State: nmv1alpha1.NodeWaiting, Wave: 2},
		{Name: "draining", State: nmv1alpha1.NodeDraining, Wave: 1},
		{Name: "restoring", State: nmv1alpha1.NodeRestoring, Wave: 1},
		{Name: "failed", State: nmv1alpha1.NodeFailed, Wave: 1},
	}
	var objs []client.Object
	for _, row := range rows {
		n := readyNode(row.Name)
		n.Status.Conditions = append(n.Status.Conditions, planned(ro, row.Wave))
		objs = append(objs, n)
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithStatusSubresource(&corev1.Node{}).Build()
	r := &RolloutReconciler{Client: c, APIReader: c}
	ctx := context.Background()
	mark := func(phase nmv1alpha1.RolloutPhase) map[string]bool {
		t.Helper()
		s := &scope{ro: ro, status: &nmv1alpha1.NodeMaintenanceRolloutStatus{Phase: phase, Nodes: rows}, obs: map[string]observed{}}
		for _, o := range objs {
			s.obs[o.GetName()] = observed{node: o.(*corev1.Node)}
		}
		if _, err := r.markPlanned(ctx, s); err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, row := range rows {
			n := &corev1.Node{}
			if err := c.Get(ctx, client.ObjectKey{Name: row.Name}, n); err != nil {
				t.Fatal(err)
			}
			got[row.Name] = plannedOf(n, corev1.NodeMaintenancePlanned) != nil
		}
		return got
	}
	want := map[string]bool{"waiting": true, "draining": true, "restoring": false, "failed": false}
	if got := mark(nmv1alpha1.RolloutProgressing); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("Progressing: nodes planned %v, want %v", got, want)
	}
	want = map[string]bool{"waiting": false, "draining": false, "restoring": false, "failed": false}
	if got := mark(nmv1alpha1.RolloutHalted); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("Halted: nodes planned %v, want %v", got, want)
	}
}
