package controller

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
)

// setCondition sets one of status.conditions, stamped with the
// NodeMaintenance's generation; its transition time changes only with its
// status.
func setCondition(s *scope, typ string, status bool, reason, message string, now time.Time) {
	c := metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: reason, Message: message, ObservedGeneration: s.nm.Generation, LastTransitionTime: metav1.NewTime(now)}
	if status {
		c.Status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&s.status.Conditions, c)
}

// setCordoned says that the node is in maintenance.
func setCordoned(s *scope, now time.Time) {
	if s.prior.Adopted {
		setCondition(s, nmv1beta1.ConditionCordoned, true, nmv1beta1.ReasonAdopted, adoptedMessage(s.nm.Spec.NodeName), now)
		return
	}
	setCondition(s, nmv1beta1.ConditionCordoned, true, nmv1beta1.ReasonCordoned, fmt.Sprintf("node %s is cordoned and tainted for the maintenance", s.nm.Spec.NodeName), now)
}

// setLeaseHeld says that the operator holds the node's lease.
func setLeaseHeld(s *scope, now time.Time) {
	setCondition(s, nmv1beta1.ConditionLeaseHeld, true, nmv1beta1.ReasonLeaseHeld, fmt.Sprintf("the operator holds the lease of node %s", s.nm.Spec.NodeName), now)
}

// setDrained says that the drain is over.
func setDrained(s *scope, now time.Time) {
	setCondition(s, nmv1beta1.ConditionDrained, true, nmv1beta1.ReasonDrained, "every pod that had to leave the node is gone", now)
}

// setDrainConditions sets the conditions after a drain round: cordoned,
// lease held, and drained or why not yet.
func setDrainConditions(s *scope, round drain.Round, now time.Time) {
	setCordoned(s, now)
	setLeaseHeld(s, now)
	forced := meta.IsStatusConditionPresentAndEqual(s.status.Conditions, nmv1beta1.ConditionDrained, metav1.ConditionFalse) &&
		meta.FindStatusCondition(s.status.Conditions, nmv1beta1.ConditionDrained).Reason == nmv1beta1.ReasonForced
	switch {
	case round.Done() && forced:
		setCondition(s, nmv1beta1.ConditionDrained, true, nmv1beta1.ReasonForced, "drained: the pods left at the timeout were deleted past their PodDisruptionBudgets", now)
	case round.Done():
		setDrained(s, now)
	case forced:
		// Keep saying so while the deleted pods terminate.
	case round.Refused():
		setCondition(s, nmv1beta1.ConditionDrained, false, nmv1beta1.ReasonBlockedByPDB, round.Message(), now)
	case !round.Evicting(s.progress.evictedRecently(now)):
		// Every pod to evict is evicted (this round's calls accepted): a
		// drain is WaitingForPods from the round that evicted its last pod,
		// not from the pass after it, so that a drain whose pods go fast
		// writes its status twice (started, drained), not three times.
		msg := fmt.Sprintf("waiting for %d pods to terminate or complete", len(round.Pending))
		if why := round.Message(); why != "" {
			msg += ": " + why // pods only someone else can remove (spec.drain.deleteEmptyDirData false)
		}
		setCondition(s, nmv1beta1.ConditionDrained, false, nmv1beta1.ReasonWaiting, msg, now)
	default:
		setCondition(s, nmv1beta1.ConditionDrained, false, nmv1beta1.ReasonDraining, fmt.Sprintf("%d pods still to leave the node", len(round.Pending)), now)
	}
}

// setRestoring says that the node is being given back (why) and that the
// drain ended (reason, msg): what a pass that finishes the restore reads
// back (restoring).
func setRestoring(s *scope, reason, why, msg string, now time.Time) {
	setCondition(s, nmv1beta1.ConditionCordoned, true, nmv1beta1.ReasonRestoring, why, now)
	setCondition(s, nmv1beta1.ConditionDrained, false, reason, boundedError(msg), now)
}

// restoring reads back what setRestoring said: why the node is given back,
// and the reason the drain ended.
func restoring(status *nmv1beta1.NodeMaintenanceStatus) (why, reason string) {
	why, reason = "the node was restored", nmv1beta1.ReasonFailed
	if c := meta.FindStatusCondition(status.Conditions, nmv1beta1.ConditionCordoned); c != nil {
		why = c.Message
	}
	if c := meta.FindStatusCondition(status.Conditions, nmv1beta1.ConditionDrained); c != nil && c.Status == metav1.ConditionFalse {
		reason = c.Reason
	}
	return why, reason
}

// setRestored says that the node and its lease were given back.
func setRestored(s *scope, why string, now time.Time) {
	setCondition(s, nmv1beta1.ConditionCordoned, false, nmv1beta1.ReasonRestored, why, now)
	setCondition(s, nmv1beta1.ConditionLeaseHeld, false, nmv1beta1.ReasonRestored, "the lease was released with the node", now)
}

// restorePending reports whether restoreAndFail began giving the node back
// and a pass has to finish it.
func restorePending(nm *nmv1beta1.NodeMaintenance) bool {
	c := meta.FindStatusCondition(nm.Status.Conditions, nmv1beta1.ConditionCordoned)
	return c != nil && c.Reason == nmv1beta1.ReasonRestoring
}
