package rollout

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	rolloutvalidation "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1/validation"
)

// haltReason says why the rollout halted, or "" while it may go on: with
// onFailure Halt (default) the first failed node, with Continue more than
// maxFailures failed nodes.
func haltReason(ro *nmv1alpha1.NodeMaintenanceRollout, rows []nmv1alpha1.RolloutNode) string {
	var failed []nmv1alpha1.RolloutNode
	for _, row := range rows {
		if row.State == nmv1alpha1.NodeFailed {
			failed = append(failed, row)
		}
	}
	if len(failed) == 0 {
		return ""
	}
	first := fmt.Sprintf("node %s failed: %s", failed[0].Name, failed[0].Reason)
	if ro.Spec.OnFailure != nmv1alpha1.RolloutContinue {
		return first
	}
	limit := 0
	if ro.Spec.MaxFailures != nil {
		limit = int(*ro.Spec.MaxFailures)
	}
	if len(failed) <= limit {
		return ""
	}
	last := failed[len(failed)-1]
	return fmt.Sprintf("%d nodes failed, more than maxFailures %d; the last, node %s: %s", len(failed), limit, last.Name, last.Reason)
}

// summarize sets the counts, the phase, the message and the conditions
// from the rows.
func (r *RolloutReconciler) summarize(_ context.Context, s *scope) (ctrl.Result, error) {
	st := s.status
	st.InProgress, st.Done, st.Failed = 0, 0, 0
	for _, row := range st.Nodes {
		switch {
		case holdsSlot(row.State):
			st.InProgress++
		case row.State == nmv1alpha1.NodeDone:
			st.Done++
		case row.State == nmv1alpha1.NodeFailed:
			st.Failed++
		}
	}
	st.Total = int32(len(st.Nodes))
	st.Blockers = append(waitingForBlockers(st.Nodes), recoveryBlockers(s)...)
	setGated(s)
	why := s.problem
	if why == "" {
		why = haltReason(s.ro, st.Nodes)
	}
	if why != "" {
		setHalted(s, why)
		return ctrl.Result{}, nil
	}
	switch {
	case st.Done+st.Failed == st.Total:
		if st.CompletedAt == nil {
			st.CompletedAt = stamp(s.now)
		}
		setPhase(s, nmv1alpha1.RolloutSucceeded, fmt.Sprintf("all %d nodes maintained: %d done, %d failed", st.Total, st.Done, st.Failed))
	case s.ro.Spec.Paused:
		setPhase(s, nmv1alpha1.RolloutPaused, fmt.Sprintf("paused: no new node starts; %d in progress, %d of %d done", st.InProgress, st.Done, st.Total))
	default:
		setPhase(s, nmv1alpha1.RolloutProgressing, progressMessage(st, s.maxUnavailable)+outsideMessage(st.Nodes, s.obs)+blockersMessage(st.Blockers))
	}
	return ctrl.Result{}, nil
}

func progressMessage(st *nmv1alpha1.NodeMaintenanceRolloutStatus, limit int) string {
	return fmt.Sprintf("%d in progress (at most %d out of service), %d of %d done", st.InProgress, limit, st.Done, st.Total)
}

// waitingForBlockers are the lines of status.blockers for the rows that wait
// for someone else's NodeMaintenance.
func waitingForBlockers(rows []nmv1alpha1.RolloutNode) []string {
	var b []string
	for _, row := range rows {
		if row.WaitingFor != "" {
			b = append(b, fmt.Sprintf("node %s waits for NodeMaintenance %s", row.Name, row.WaitingFor))
		}
	}
	return b
}

// outsideMessage names the nodes of the set out of service for a reason
// other than this rollout (cordoned by hand, NotReady, a failed node kept
// in maintenance): they count toward maxUnavailable, and a rollout that
// waits for a slot waits for them.
func outsideMessage(rows []nmv1alpha1.RolloutNode, obs map[string]observed) string {
	var names []string
	for _, row := range rows {
		if !holdsSlot(row.State) && outOfService(row, obs[row.Name]) {
			names = append(names, row.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	const shown = 5
	list := strings.Join(names[:min(len(names), shown)], ", ")
	if len(names) > shown {
		list += fmt.Sprintf(" and %d more", len(names)-shown)
	}
	return fmt.Sprintf("; out of service outside this rollout, counted toward maxUnavailable: %s", list)
}

// setHalted halts the rollout, saying why.
func setHalted(s *scope, why string) {
	msg := "halted: " + why + "; no new node starts"
	if s.status.InProgress > 0 {
		msg += fmt.Sprintf(", the %d in progress finish", s.status.InProgress)
	}
	setPhase(s, nmv1alpha1.RolloutHalted, msg)
}

// setPhase sets the phase, message and conditions, which follow the phase.
func setPhase(s *scope, phase nmv1alpha1.RolloutPhase, msg string) {
	st, gen := s.status, s.ro.Generation
	st.Phase, st.Message, st.ObservedGeneration = phase, msg, gen
	progressing := metav1.Condition{Type: nmv1alpha1.RolloutConditionProgressing, Status: metav1.ConditionFalse, Reason: string(phase), Message: msg, ObservedGeneration: gen}
	if phase == nmv1alpha1.RolloutProgressing {
		progressing.Status = metav1.ConditionTrue
	}
	completed := metav1.Condition{Type: nmv1alpha1.RolloutConditionCompleted, Status: metav1.ConditionFalse, Reason: string(phase), Message: msg, ObservedGeneration: gen}
	if phase == nmv1alpha1.RolloutSucceeded {
		completed.Status = metav1.ConditionTrue
	}
	halted := metav1.Condition{Type: nmv1alpha1.RolloutConditionHalted, Status: metav1.ConditionFalse, Reason: "NotHalted", Message: "no failure stopped the rollout", ObservedGeneration: gen}
	if phase == nmv1alpha1.RolloutHalted {
		halted.Status, halted.Reason, halted.Message = metav1.ConditionTrue, "Halted", msg
	}
	for _, c := range []metav1.Condition{progressing, completed, halted} {
		meta.SetStatusCondition(&st.Conditions, c)
	}
}

// writeStatus writes the status when it changed, with the resourceVersion
// read: a pass that decided from an older status loses (Conflict) and
// decides again. The rows are compacted first when they grew past
// rolloutvalidation.RowsBudget (rolloutvalidation.CompactRows).
func (r *RolloutReconciler) writeStatus(ctx context.Context, s *scope) (ctrl.Result, error) {
	rolloutvalidation.CompactRows(s.status.Nodes, s.old.Nodes, rolloutvalidation.RowsBudget)
	if equality.Semantic.DeepEqual(&s.ro.Status, s.status) {
		return ctrl.Result{}, nil
	}
	before := s.ro.Status
	s.ro.Status = *s.status.DeepCopy()
	if err := r.Client.Status().Update(ctx, s.ro); err != nil {
		return writeFailed(s, fmt.Errorf("write the status of rollout %s: %w", s.ro.Name, err))
	}
	r.notifyWritten(s, &before)
	return ctrl.Result{}, nil
}

// emitEvents records what this pass changed: nodes started, done or
// failed, and the rollout halted or completed.
func (r *RolloutReconciler) emitEvents(_ context.Context, s *scope) (ctrl.Result, error) {
	before := map[string]nmv1alpha1.RolloutNodeState{}
	for _, row := range s.old.Nodes {
		before[row.Name] = row.State
	}
	for _, row := range s.status.Nodes {
		if before[row.Name] == row.State {
			continue
		}
		switch row.State {
		case nmv1alpha1.NodeDraining:
			r.Recorder.Eventf(s.ro, nil, corev1.EventTypeNormal, ReasonNodeStarted, "Start", "node %s started (wave %d): NodeMaintenance %s", row.Name, row.Wave, row.Maintenance)
		case nmv1alpha1.NodeDone:
			r.Recorder.Eventf(s.ro, nil, corev1.EventTypeNormal, ReasonNodeDone, "Done", "node %s maintained, restored, recovered and soaked", row.Name)
		case nmv1alpha1.NodeFailed:
			r.Recorder.Eventf(s.ro, nil, corev1.EventTypeWarning, ReasonNodeFailed, "Fail", "node %s failed: %s", row.Name, row.Reason)
		}
	}
	if s.old.Phase != s.status.Phase {
		switch s.status.Phase {
		case nmv1alpha1.RolloutHalted:
			r.Recorder.Eventf(s.ro, nil, corev1.EventTypeWarning, ReasonHalted, "Halt", "%s", s.status.Message)
		case nmv1alpha1.RolloutSucceeded:
			r.Recorder.Eventf(s.ro, nil, corev1.EventTypeNormal, ReasonCompleted, "Complete", "%s", s.status.Message)
		}
	}
	return ctrl.Result{}, nil
}
