package nodestate

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	t0 = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	// the kubelet's, which no edit may touch
	ready = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
		LastHeartbeatTime: metav1.NewTime(t0), LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}
	foreignDrained = corev1.NodeCondition{Type: corev1.NodeDrained, Status: corev1.ConditionTrue, Reason: "AdminRequested", Message: "drained by hand",
		LastHeartbeatTime: metav1.NewTime(t0.Add(-time.Minute)), LastTransitionTime: metav1.NewTime(t0.Add(-2 * time.Hour))}
	foreignInProgress = corev1.NodeCondition{Type: corev1.NodeMaintenanceInProgress, Status: corev1.ConditionFalse, Reason: "Cleared",
		LastTransitionTime: metav1.NewTime(t0.Add(-3 * time.Hour))}
	// one a maintenance that could not clean up left behind
	leftover = corev1.NodeCondition{Type: corev1.NodeDrainInProgress, Status: corev1.ConditionTrue, Reason: ReasonAdminRequested,
		Message: Message("NodeMaintenance old: the node is being drained"), LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}
)

func withConditions(cs ...corev1.NodeCondition) *corev1.Node {
	n := node(false, nil)
	n.Status.Conditions = append([]corev1.NodeCondition(nil), cs...)
	return n
}

// mark applies what a pass at stage writes, as the API server would.
func mark(n *corev1.Node, p Prior, stage Stage, now time.Time) []ConditionEdit {
	edits := SetConditions(n.Status.Conditions, MaintenanceConditions("nm", stage), p.MayWrite, now)
	ApplyEdits(n, edits)
	return edits
}

func conditionOf(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	return find(n.Status.Conditions, t)
}

// Record, the maintenance's stages, restore: the conditions come back
// exactly as they were (times included), whatever was there; during the
// maintenance the node says what the stage says.
func TestConditionsRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		before []corev1.NodeCondition
		// want, when set, differs from before on purpose.
		want []corev1.NodeCondition
	}{
		{"only the kubelet's", []corev1.NodeCondition{ready}, nil},
		{"a foreign Drained", []corev1.NodeCondition{ready, foreignDrained}, nil},
		{"foreign MaintenanceInProgress and Drained", []corev1.NodeCondition{foreignInProgress, ready, foreignDrained}, nil},
		{"the operator's own left over is removed", []corev1.NodeCondition{ready, leftover}, []corev1.NodeCondition{ready}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := withConditions(tt.before...)
			prior, err := Decode(Record(n, t0).Encode())
			if err != nil {
				t.Fatal(err)
			}
			mark(n, prior, Draining, t0.Add(time.Minute))
			assertStage(t, n, map[corev1.NodeConditionType]corev1.ConditionStatus{
				corev1.NodeMaintenanceInProgress: corev1.ConditionTrue, corev1.NodeDrainInProgress: corev1.ConditionTrue, corev1.NodeDrained: corev1.ConditionFalse})
			mark(n, prior, DrainDone, t0.Add(2*time.Minute))
			assertStage(t, n, map[corev1.NodeConditionType]corev1.ConditionStatus{
				corev1.NodeMaintenanceInProgress: corev1.ConditionTrue, corev1.NodeDrainInProgress: corev1.ConditionFalse, corev1.NodeDrained: corev1.ConditionTrue})
			if got := conditionOf(n, corev1.NodeReady); !reflect.DeepEqual(*got, ready) {
				t.Errorf("the kubelet's Ready changed: %+v", got)
			}
			ApplyEdits(n, RestoreConditions(n.Status.Conditions, prior))
			want := tt.want
			if want == nil {
				want = tt.before
			}
			assertSameConditions(t, want, n.Status.Conditions)
			if edits := RestoreConditions(n.Status.Conditions, prior); len(edits) != 0 {
				t.Errorf("a second restore edits again: %+v", edits)
			}
		})
	}
}

func assertStage(t *testing.T, n *corev1.Node, want map[corev1.NodeConditionType]corev1.ConditionStatus) {
	t.Helper()
	for typ, status := range want {
		c := conditionOf(n, typ)
		switch {
		case c == nil:
			t.Errorf("no %s condition, want %s", typ, status)
		case c.Status != status || !Written(*c):
			t.Errorf("%s=%s (%q), want %s written by the operator", typ, c.Status, c.Message, status)
		}
	}
}

// assertSameConditions compares as the API server keeps them: by type, in
// any order.
func assertSameConditions(t *testing.T, want, got []corev1.NodeCondition) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("conditions %+v, want %+v", got, want)
	}
	for _, w := range want {
		if g := find(got, w.Type); g == nil || !equality.Semantic.DeepEqual(*g, w) {
			t.Errorf("%s: got %+v, want %+v", w.Type, g, w)
		}
	}
}

// A foreign condition written during the maintenance is its writer's: the
// maintenance does not write over it, and the restore leaves it.
func TestConditionsWrittenDuringMaintenanceStay(t *testing.T) {
	n := withConditions(ready)
	prior := Record(n, t0)
	mark(n, prior, Draining, t0)
	admin := corev1.NodeCondition{Type: corev1.NodeDrainInProgress, Status: corev1.ConditionFalse, Reason: "AdminRequested", Message: "stopped by hand",
		LastTransitionTime: metav1.NewTime(t0.Add(time.Minute))}
	ApplyEdits(n, []ConditionEdit{{Type: admin.Type, Condition: &admin}})
	for _, e := range mark(n, prior, DrainDone, t0.Add(2*time.Minute)) {
		if e.Type == admin.Type {
			t.Errorf("the maintenance wrote over a condition someone wrote during it: %+v", e)
		}
	}
	ApplyEdits(n, RestoreConditions(n.Status.Conditions, prior))
	assertSameConditions(t, []corev1.NodeCondition{ready, admin}, n.Status.Conditions)
}

// A record of an operator version that did not record conditions reads
// without them: a foreign condition is never written over (nothing says
// what to put back), and the restore removes only the operator's own.
func TestConditionsOfAnOldRecord(t *testing.T) {
	old := `{"unschedulable":false,"cordonedAt":"2026-12-01T10:00:00Z"}`
	prior, err := Decode(old)
	if err != nil {
		t.Fatalf("an old record must stay readable: %v", err)
	}
	n := withConditions(ready, foreignDrained)
	mark(n, prior, DrainDone, t0)
	if got := conditionOf(n, corev1.NodeDrained); !reflect.DeepEqual(*got, foreignDrained) {
		t.Errorf("a foreign Drained was written over under an old record: %+v", got)
	}
	ApplyEdits(n, RestoreConditions(n.Status.Conditions, prior))
	assertSameConditions(t, []corev1.NodeCondition{ready, foreignDrained}, n.Status.Conditions)
}

// A pass that finds the conditions as it would write them writes nothing
// (passes may run twice); a new message with the same status keeps the
// transition time, a new status moves it; the heartbeat is the write.
func TestSetConditionsStamps(t *testing.T) {
	n := withConditions(ready)
	mark(n, Prior{}, Draining, t0)
	if edits := SetConditions(n.Status.Conditions, MaintenanceConditions("nm", Draining), Prior{}.MayWrite, t0.Add(time.Hour)); len(edits) != 0 {
		t.Errorf("the same stage again edits: %+v", edits)
	}
	mark(n, Prior{}, DrainDone, t0.Add(time.Minute))
	in, drained := conditionOf(n, corev1.NodeMaintenanceInProgress), conditionOf(n, corev1.NodeDrained)
	if !in.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("MaintenanceInProgress stayed True, yet its transition moved to %s", in.LastTransitionTime)
	}
	if !drained.LastTransitionTime.Time.Equal(t0.Add(time.Minute)) || !drained.LastHeartbeatTime.Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("Drained turned True at %s: transition %s, heartbeat %s", t0.Add(time.Minute), drained.LastTransitionTime, drained.LastHeartbeatTime)
	}
	if drained.Reason != ReasonDrainCompleted || conditionOf(n, corev1.NodeDrainInProgress).Reason != ReasonDrainCompleted {
		t.Errorf("a finished drain's reasons: Drained %s, DrainInProgress %s, want %s", drained.Reason, conditionOf(n, corev1.NodeDrainInProgress).Reason, ReasonDrainCompleted)
	}
}

// RemoveConditions removes only what owned says is ours.
func TestRemoveConditionsLeavesForeign(t *testing.T) {
	ours := corev1.NodeCondition{Type: corev1.NodeMaintenancePlanned, Status: corev1.ConditionTrue, Message: Message("rollout r")}
	foreign := ours
	foreign.Message = "planned by the change board"
	types := []corev1.NodeConditionType{corev1.NodeMaintenancePlanned}
	if edits := RemoveConditions([]corev1.NodeCondition{ready, foreign}, types, Written); len(edits) != 0 {
		t.Errorf("a foreign MaintenancePlanned would be removed: %+v", edits)
	}
	edits := RemoveConditions([]corev1.NodeCondition{ready, ours}, types, Written)
	if len(edits) != 1 || edits[0].Condition != nil || edits[0].Type != corev1.NodeMaintenancePlanned {
		t.Errorf("edits %+v, want the removal of MaintenancePlanned", edits)
	}
}

// The patch names only the edited types: a set by its full condition, a
// removal by the strategic merge delete directive; and carries the
// resourceVersion it was decided on.
func TestConditionsPatch(t *testing.T) {
	c := corev1.NodeCondition{Type: corev1.NodeDrained, Status: corev1.ConditionTrue, Reason: ReasonDrainCompleted, Message: "m",
		LastHeartbeatTime: metav1.NewTime(t0), LastTransitionTime: metav1.NewTime(t0)}
	got := ConditionsPatch("42", []ConditionEdit{{Type: c.Type, Condition: &c}, {Type: corev1.NodeDrainInProgress}})
	var patch map[string]any
	if err := json.Unmarshal(got, &patch); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"metadata": map[string]any{"resourceVersion": "42"},
		"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Drained", "status": "True", "reason": "DrainCompleted", "message": "m",
				"lastHeartbeatTime": "2026-12-05T10:00:00Z", "lastTransitionTime": "2026-12-05T10:00:00Z"},
			map[string]any{"$patch": "delete", "type": "DrainInProgress"},
		}},
	}
	if !reflect.DeepEqual(patch, want) {
		t.Errorf("patch %s", got)
	}
}
