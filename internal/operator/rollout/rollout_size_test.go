package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	rolloutvalidation "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1/validation"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

func cloudNodeName(i int) string {
	return fmt.Sprintf("ip-10-12-%d-%d.eu-central-1.compute.internal", i/256, i%256)
}

// onePass runs one pass of rollout ro (named "ro") over a fake cluster of
// ro and objs, and returns the client and the rollout as it wrote it.
func onePass(t *testing.T, ro *nmv1alpha1.NodeMaintenanceRollout, objs ...client.Object) (client.Client, *nmv1alpha1.NodeMaintenanceRollout) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(append(objs, ro)...).WithStatusSubresource(ro).Build()
	r := &RolloutReconciler{Client: c, APIReader: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), Now: func() time.Time { return now }}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "ro"}}); err != nil {
		t.Fatal(err)
	}
	got := &nmv1alpha1.NodeMaintenanceRollout{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "ro"}, got); err != nil {
		t.Fatal(err)
	}
	return c, got
}

// A selector that came to match more nodes than the status can keep rows
// for (nodes joined after the webhook admitted it) halts the rollout when
// it resolves the set: nothing starts, and the message says how to split it.
func TestResolveHaltsASetTooLargeForTheStatus(t *testing.T) {
	ro := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "ro", UID: "u1", Finalizers: []string{nmv1alpha1.RolloutFinalizer}},
		Spec: nmv1alpha1.NodeMaintenanceRolloutSpec{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}}}}
	var objs []client.Object
	for i := range 6000 {
		objs = append(objs, readyNode(cloudNodeName(i)))
	}
	c, got := onePass(t, ro, objs...)
	if got.Status.Phase != nmv1alpha1.RolloutHalted || !strings.Contains(got.Status.Message, "has 6000 nodes, more than one rollout can keep a status row for") ||
		!strings.Contains(got.Status.Message, "nothing was started") || len(got.Status.Nodes) != 0 {
		t.Errorf("phase %s, message %q, %d rows; want Halted before any row, saying the set is too large", got.Status.Phase, got.Status.Message, len(got.Status.Nodes))
	}
	children := &nmv1beta1.NodeMaintenanceList{}
	if err := c.List(context.Background(), children); err != nil || len(children.Items) != 0 {
		t.Errorf("children %d (%v), want none", len(children.Items), err)
	}
}

// A pass over a set whose rows outgrew the budget writes them compacted:
// the rows Done before the pass lose their details, first finished first,
// until the rows fit.
func TestPassCompactsTheRowsOfALargeSet(t *testing.T) {
	at := stamp(now.Add(-time.Hour))
	var names []string
	var rows []nmv1alpha1.RolloutNode
	objs := []client.Object{}
	for i := range 4000 {
		name := cloudNodeName(i)
		names = append(names, name)
		objs = append(objs, readyNode(name))
		rows = append(rows, nmv1alpha1.RolloutNode{Name: name, Wave: int32(i/400 + 1), State: nmv1alpha1.NodeDone, Maintenance: childName("ro", name),
			StartedAt: at, DrainedAt: at, RestoredAt: at, RecoveredAt: at, FinishedAt: at,
			Workloads: []string{"Deployment team-a/web", "Deployment team-a/api", "StatefulSet team-b/db", "Deployment kube-system/coredns"}})
	}
	ro := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "ro", UID: "u1", Finalizers: []string{nmv1alpha1.RolloutFinalizer}},
		Spec: nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: names}}
	ro.Status.Nodes = rows
	before, _ := json.Marshal(rows)
	if len(before) <= rolloutvalidation.RowsBudget {
		t.Fatalf("the rows take %d bytes, within the budget of %d: the test would not compact", len(before), rolloutvalidation.RowsBudget)
	}
	_, got := onePass(t, ro, objs...)
	after, _ := json.Marshal(got.Status.Nodes)
	if len(after) > rolloutvalidation.RowsBudget {
		t.Errorf("the rows take %d bytes after the pass, more than the budget of %d", len(after), rolloutvalidation.RowsBudget)
	}
	first, last := got.Status.Nodes[0], got.Status.Nodes[len(got.Status.Nodes)-1]
	if first.Maintenance != "" || first.Workloads != nil || first.StartedAt == nil || first.FinishedAt == nil || first.State != nmv1alpha1.NodeDone {
		t.Errorf("first row %+v, want compacted to name, wave, state, startedAt, finishedAt", first)
	}
	if last.Maintenance == "" || last.Workloads == nil {
		t.Errorf("last row %+v was compacted, want its details kept once the rows fit", last)
	}
	if got.Status.Phase != nmv1alpha1.RolloutSucceeded || got.Status.Done != 4000 {
		t.Errorf("phase %s, %d done; want Succeeded, 4000", got.Status.Phase, got.Status.Done)
	}
}
