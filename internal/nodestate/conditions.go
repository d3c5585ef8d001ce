package nodestate

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The node lifecycle conditions of KEP-5683 (Kubernetes 1.37, alpha): the
// types are corev1's NodeMaintenanceInProgress, NodeDrainInProgress,
// NodeDrained and NodeMaintenancePlanned. The KEP leaves them to "an admin,
// or an admin-authorized maintenance controller", which sets them True and
// clears them by setting them False or removing them; any authorized actor
// may write them. Reasons are stable CamelCase cause categories: the KEP's
// own examples where they fit, two of ours where none does.
const (
	// ReasonAdminRequested: an admin asked for it (a NodeMaintenance, a
	// rollout without a window).
	ReasonAdminRequested = "AdminRequested"
	// ReasonDrainCompleted: the drain's criteria are met (every pod that had
	// to leave is gone).
	ReasonDrainCompleted = "DrainCompleted"
	// ReasonMaintenanceWindow: planned by a rollout that starts nodes only
	// inside its maintenance window.
	ReasonMaintenanceWindow = "MaintenanceWindow"
	// ReasonDrainNotCompleted is Drained=False while the drain goes on.
	ReasonDrainNotCompleted = "DrainNotCompleted"
	// ReasonDrainTimedOut clears DrainInProgress (and keeps Drained False) on
	// a node left in maintenance after spec.drain.timeout.
	ReasonDrainTimedOut = "DrainTimedOut"
)

// ConditionMarker begins the message of every lifecycle condition the
// operator writes: what tells its conditions from a foreign one (an admin's,
// another controller's) of the same type. The operator changes or removes
// only conditions that carry it, except a foreign condition a maintenance
// recorded before it wrote over it, which the restore puts back as it was.
const ConditionMarker = "nodemaintenance.medik8s.io: "

// MaintenanceConditionTypes are the conditions a NodeMaintenance writes on
// its node and restores. MaintenancePlanned is the rollout's.
var MaintenanceConditionTypes = []corev1.NodeConditionType{
	corev1.NodeMaintenanceInProgress, corev1.NodeDrainInProgress, corev1.NodeDrained,
}

// Written reports whether the operator wrote c: its message carries the
// marker.
func Written(c corev1.NodeCondition) bool { return strings.HasPrefix(c.Message, ConditionMarker) }

// Message is a condition message marked as the operator's.
func Message(format string, args ...any) string {
	return ConditionMarker + fmt.Sprintf(format, args...)
}

// PlannedBy begins the message of the MaintenancePlanned conditions that
// NodeMaintenanceRollout rollout writes: what tells them from anyone
// else's, another rollout's included.
func PlannedBy(rollout string) string { return Message("NodeMaintenanceRollout %s ", rollout) }

// Stage is where a maintenance is, as its node's conditions say.
type Stage int

const (
	// Draining: cordoned, the drain going on.
	Draining Stage = iota
	// DrainDone: cordoned and drained.
	DrainDone
	// DrainStopped: cordoned, the drain given up (spec.drain.timeout with
	// onTimeout Fail); the node stays in maintenance.
	DrainStopped
)

// MaintenanceConditions are the conditions of NodeMaintenance nm's node at
// stage, without times (SetConditions stamps them):
//
//	stage         MaintenanceInProgress   DrainInProgress          Drained
//	Draining      True AdminRequested     True AdminRequested      False DrainNotCompleted
//	DrainDone     True AdminRequested     False DrainCompleted     True DrainCompleted
//	DrainStopped  True AdminRequested     False DrainTimedOut      False DrainTimedOut
func MaintenanceConditions(nm string, stage Stage) []corev1.NodeCondition {
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: Message("NodeMaintenance %s: %s", nm, msg)}
	}
	in := cond(corev1.NodeMaintenanceInProgress, corev1.ConditionTrue, ReasonAdminRequested, "the node is cordoned and tainted for maintenance")
	switch stage {
	case DrainDone:
		return []corev1.NodeCondition{in,
			cond(corev1.NodeDrainInProgress, corev1.ConditionFalse, ReasonDrainCompleted, "the drain is over"),
			cond(corev1.NodeDrained, corev1.ConditionTrue, ReasonDrainCompleted, "every pod that had to leave the node is gone")}
	case DrainStopped:
		return []corev1.NodeCondition{in,
			cond(corev1.NodeDrainInProgress, corev1.ConditionFalse, ReasonDrainTimedOut, "the drain timed out; the node stays in maintenance"),
			cond(corev1.NodeDrained, corev1.ConditionFalse, ReasonDrainTimedOut, "the drain timed out with pods left on the node")}
	}
	return []corev1.NodeCondition{in,
		cond(corev1.NodeDrainInProgress, corev1.ConditionTrue, ReasonAdminRequested, "the node is being drained"),
		cond(corev1.NodeDrained, corev1.ConditionFalse, ReasonDrainNotCompleted, "pods still have to leave the node")}
}

// ConditionEdit is one change of a node's conditions: Condition set as it
// is, or, when nil, the condition of Type removed.
type ConditionEdit struct {
	Type      corev1.NodeConditionType
	Condition *corev1.NodeCondition
}

// SetConditions are the edits that make the node's conditions of want's
// types say what want says. A condition that already says it (status,
// reason, message) is left alone; an existing condition is written over only
// when mayWrite allows it (the operator's own, or a foreign one the
// maintenance recorded). lastHeartbeatTime is now on every condition
// written; lastTransitionTime is now when the status changes, and kept
// otherwise.
func SetConditions(current, want []corev1.NodeCondition, mayWrite func(corev1.NodeCondition) bool, now time.Time) []ConditionEdit {
	stamp := metav1.NewTime(now.UTC().Truncate(time.Second))
	var edits []ConditionEdit
	for _, w := range want {
		c := w
		c.LastHeartbeatTime, c.LastTransitionTime = stamp, stamp
		if cur := find(current, w.Type); cur != nil {
			if !mayWrite(*cur) || (cur.Status == w.Status && cur.Reason == w.Reason && cur.Message == w.Message) {
				continue
			}
			if cur.Status == w.Status {
				c.LastTransitionTime = cur.LastTransitionTime
			}
		}
		edits = append(edits, ConditionEdit{Type: w.Type, Condition: &c})
	}
	return edits
}

// RemoveConditions are the edits that remove the node's conditions of types
// that owned says are ours to remove.
func RemoveConditions(current []corev1.NodeCondition, types []corev1.NodeConditionType, owned func(corev1.NodeCondition) bool) []ConditionEdit {
	var edits []ConditionEdit
	for _, t := range types {
		if cur := find(current, t); cur != nil && owned(*cur) {
			edits = append(edits, ConditionEdit{Type: t})
		}
	}
	return edits
}

// recordConditions are the node's maintenance conditions that someone else
// wrote: the record keeps them, so that the restore puts them back. A
// condition the operator wrote (left by a maintenance that could not clean
// up) is not recorded, so that the restore removes it.
func recordConditions(node *corev1.Node) []corev1.NodeCondition {
	var out []corev1.NodeCondition
	for _, t := range MaintenanceConditionTypes {
		if c := find(node.Status.Conditions, t); c != nil && !Written(*c) {
			out = append(out, *c)
		}
	}
	return out
}

// MayWrite reports whether the maintenance may write over c: the operator
// wrote it, or it is the foreign condition recorded before the maintenance
// (as it was then; one someone wrote since is theirs, and left alone). A
// record of an operator version that did not record conditions has none, so
// such a maintenance never writes over a foreign condition.
func (p Prior) MayWrite(c corev1.NodeCondition) bool {
	if Written(c) {
		return true
	}
	r := find(p.Conditions, c.Type)
	return r != nil && r.Status == c.Status && r.Reason == c.Reason && r.Message == c.Message &&
		r.LastTransitionTime.Equal(&c.LastTransitionTime)
}

// RestoreConditions are the edits that give the node back its maintenance
// conditions as recorded in p: each condition of a maintenance type that the
// operator wrote is replaced by the recorded foreign one, exactly, or removed
// when there was none. A condition someone else wrote, or removed, during
// the maintenance is left as they left it.
func RestoreConditions(current []corev1.NodeCondition, p Prior) []ConditionEdit {
	var edits []ConditionEdit
	for _, t := range MaintenanceConditionTypes {
		cur := find(current, t)
		if cur == nil || !Written(*cur) {
			continue
		}
		if r := find(p.Conditions, t); r != nil {
			c := *r
			edits = append(edits, ConditionEdit{Type: t, Condition: &c})
			continue
		}
		edits = append(edits, ConditionEdit{Type: t})
	}
	return edits
}

// ApplyEdits changes node's conditions in place as edits say, as the API
// server applies their patch (ConditionsPatch): a set replaces the
// condition of its type or is appended, a removal drops it.
func ApplyEdits(node *corev1.Node, edits []ConditionEdit) {
	for _, e := range edits {
		i := index(node.Status.Conditions, e.Type)
		switch {
		case e.Condition == nil && i >= 0:
			node.Status.Conditions = append(node.Status.Conditions[:i:i], node.Status.Conditions[i+1:]...)
		case e.Condition != nil && i >= 0:
			node.Status.Conditions[i] = *e.Condition
		case e.Condition != nil:
			node.Status.Conditions = append(node.Status.Conditions, *e.Condition)
		}
	}
}

// ConditionsPatch is the strategic merge patch of a node's status that
// makes edits and nothing else: conditions merge by type, so the kubelet's
// and everyone else's stay as they are. resourceVersion, when set, makes
// the patch fail with a Conflict if the node changed since it was read: a
// decision taken on a condition must not land on a newer one.
func ConditionsPatch(resourceVersion string, edits []ConditionEdit) []byte {
	conditions := make([]any, 0, len(edits))
	for _, e := range edits {
		if e.Condition == nil {
			conditions = append(conditions, map[string]string{"$patch": "delete", "type": string(e.Type)})
			continue
		}
		conditions = append(conditions, e.Condition)
	}
	patch := map[string]any{"status": map[string]any{"conditions": conditions}}
	if resourceVersion != "" {
		patch["metadata"] = map[string]string{"resourceVersion": resourceVersion}
	}
	b, _ := json.Marshal(patch) // maps of strings and conditions always marshal
	return b
}

func find(conditions []corev1.NodeCondition, t corev1.NodeConditionType) *corev1.NodeCondition {
	if i := index(conditions, t); i >= 0 {
		return &conditions[i]
	}
	return nil
}

func index(conditions []corev1.NodeCondition, t corev1.NodeConditionType) int {
	for i := range conditions {
		if conditions[i].Type == t {
			return i
		}
	}
	return -1
}
