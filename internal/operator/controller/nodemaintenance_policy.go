package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
)

// ReasonForcedDelete is the event of a pod deleted by spec.drain.onTimeout
// Force, on the pod, its node and the NodeMaintenance.
const ReasonForcedDelete = "ForcedDeletion"

// policy is spec.drain, never nil.
func policy(nm *nmv1beta1.NodeMaintenance) nmv1beta1.DrainPolicy {
	if nm.Spec.Drain == nil {
		return nmv1beta1.DrainPolicy{}
	}
	return *nm.Spec.Drain
}

// rules are the drain's rules for this pass: spec.drain, the node as read
// now, the cordon's time from the prior-state record, the clock, and the
// operator's own pods evicted last. The preview builds the same Rules from
// what it reads (drain.NewPreview), so the two classify every pod alike.
func (r *NodeMaintenanceReconciler) rules(s *scope) drain.Rules {
	rules := drain.Rules{Policy: s.nm.Spec.Drain, Node: s.node, CordonedAt: s.prior.CordonedAt, Now: r.now()}
	if own := r.Options.OperatorDeployment; own.Name != "" {
		rules.EvictLast = drain.OwnedByDeployment(own.Namespace, own.Name)
	}
	return rules
}

// drainDeadline is when spec.drain.timeout expires, counted from the cordon;
// zero without a timeout.
func drainDeadline(s *scope) time.Time {
	p := policy(s.nm)
	if p.Timeout == nil {
		return time.Time{}
	}
	start := s.prior.CordonedAt
	if start.IsZero() {
		start = s.nm.CreationTimestamp.Time
	}
	return start.Add(p.Timeout.Duration)
}

// onTimeout carries out spec.drain.onTimeout once the drain's deadline has
// passed with pods still to go. Fail and Restore end the maintenance; Force
// deletes what is left and lets the drain finish. It returns handled=false
// before the deadline, or when nothing is left.
func (r *NodeMaintenanceReconciler) onTimeout(ctx context.Context, s *scope, round drain.Round) (res ctrl.Result, handled bool, err error) {
	deadline := drainDeadline(s)
	if deadline.IsZero() || round.Done() || r.now().Before(deadline) {
		return ctrl.Result{}, false, nil
	}
	p := policy(s.nm)
	timeout := p.Timeout.Duration
	action := p.OnTimeout
	if action == "" {
		action = nmv1beta1.DrainTimeoutFail
	}
	left := round.Message()
	if left == "" {
		left = fmt.Sprintf("%d pods still had to leave", len(round.Pending))
	}
	switch {
	case action == nmv1beta1.DrainTimeoutForce && !r.Options.AllowForceDrain:
		msg := fmt.Sprintf("the drain of node %s timed out after %s (spec.drain.timeout) and spec.drain.onTimeout is Force, "+
			"but this operator is not allowed to delete pods (install it with allow_force_drain = true, or --allow-force-drain); "+
			"the node is left cordoned and tainted, and deleting this NodeMaintenance restores it. Left on the node: %s", s.node.Name, timeout, left)
		res, err := r.failWith(ctx, s, nmv1beta1.ReasonTimedOut, msg)
		return res, true, err
	case action == nmv1beta1.DrainTimeoutForce:
		return r.force(ctx, s, round, timeout)
	case action == nmv1beta1.DrainTimeoutRestore:
		msg := fmt.Sprintf("the drain of node %s timed out after %s (spec.drain.timeout); the node was restored to its state from before "+
			"the maintenance (spec.drain.onTimeout Restore). Left on the node at the timeout: %s", s.node.Name, timeout, left)
		res, err := r.restoreAndFail(ctx, s, nmv1beta1.ReasonTimedOut, "the node was restored when the drain timed out", msg)
		return res, true, err
	default:
		msg := fmt.Sprintf("the drain of node %s timed out after %s (spec.drain.timeout); the node is left cordoned and tainted "+
			"(spec.drain.onTimeout Fail), and deleting this NodeMaintenance restores it. Left on the node: %s", s.node.Name, timeout, left)
		res, err := r.failWith(ctx, s, nmv1beta1.ReasonTimedOut, msg)
		return res, true, err
	}
}

// force deletes the pods the round left that are not terminating yet,
// bypassing their PodDisruptionBudgets, with an event on the pod, the node
// and the NodeMaintenance for each. The drain then waits for them as for
// any terminating pod.
func (r *NodeMaintenanceReconciler) force(ctx context.Context, s *scope, round drain.Round, timeout time.Duration) (ctrl.Result, bool, error) {
	grace := r.rules(s).Grace()
	deleted := 0
	for i := range round.Pending {
		pod := &round.Pending[i]
		if pod.DeletionTimestamp != nil {
			continue
		}
		opts := []client.DeleteOption{client.Preconditions{UID: &pod.UID}}
		if grace != nil {
			opts = append(opts, client.GracePeriodSeconds(*grace))
		}
		err := r.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}, opts...)
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			continue // gone, or another pod by that name
		case err != nil:
			return ctrl.Result{}, true, fmt.Errorf("delete pod %s/%s after the drain of node %s timed out (spec.drain.onTimeout Force): %w", pod.Namespace, pod.Name, s.node.Name, err)
		}
		deleted++
		note := fmt.Sprintf("Pod %s/%s deleted, bypassing its PodDisruptionBudgets: the drain of node %s timed out after %s and NodeMaintenance %s asks for Force",
			pod.Namespace, pod.Name, s.node.Name, timeout, s.nm.Name)
		r.Recorder.Eventf(pod, s.nm, corev1.EventTypeWarning, ReasonForcedDelete, "Delete", "%s", note)
		// Related to the pod: events of one object with the same reason and
		// related object are merged into one series.
		r.Recorder.Eventf(s.node, pod, corev1.EventTypeWarning, ReasonForcedDelete, "Delete", "%s", note)
		r.Recorder.Eventf(s.nm, pod, corev1.EventTypeWarning, ReasonForcedDelete, "Delete", "%s", note)
	}
	if deleted > 0 {
		setCondition(s, nmv1beta1.ConditionDrained, false, nmv1beta1.ReasonForced,
			fmt.Sprintf("the drain timed out after %s; the pods left are deleted past their PodDisruptionBudgets (spec.drain.onTimeout Force)", timeout), r.now())
		if err := r.writeStatus(ctx, s.nm, s.status); err != nil {
			res, err := requeueOnConflict(err)
			return res, true, err
		}
		return ctrl.Result{RequeueAfter: evictedRecently}, true, nil
	}
	return ctrl.Result{}, false, nil
}

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

// setDrainConditions sets the conditions after a drain round: cordoned,
// lease held, and drained or why not yet.
func setDrainConditions(s *scope, round drain.Round, now time.Time) {
	setCondition(s, nmv1beta1.ConditionCordoned, true, nmv1beta1.ReasonCordoned, fmt.Sprintf("node %s is cordoned and tainted for the maintenance", s.nm.Spec.NodeName), now)
	setCondition(s, nmv1beta1.ConditionLeaseHeld, true, nmv1beta1.ReasonLeaseHeld, fmt.Sprintf("the operator holds the lease of node %s", s.nm.Spec.NodeName), now)
	forced := meta.IsStatusConditionPresentAndEqual(s.status.Conditions, nmv1beta1.ConditionDrained, metav1.ConditionFalse) &&
		meta.FindStatusCondition(s.status.Conditions, nmv1beta1.ConditionDrained).Reason == nmv1beta1.ReasonForced
	switch {
	case round.Done() && forced:
		setCondition(s, nmv1beta1.ConditionDrained, true, nmv1beta1.ReasonForced, "drained: the pods left at the timeout were deleted past their PodDisruptionBudgets", now)
	case round.Done():
		setCondition(s, nmv1beta1.ConditionDrained, true, nmv1beta1.ReasonDrained, "every pod that had to leave the node is gone", now)
	case forced:
		// Keep saying so while the deleted pods terminate.
	case round.Refused():
		setCondition(s, nmv1beta1.ConditionDrained, false, nmv1beta1.ReasonBlockedByPDB, round.Message(), now)
	case len(round.Plan.ToEvict) == 0 && len(round.Plan.Last) == 0:
		setCondition(s, nmv1beta1.ConditionDrained, false, nmv1beta1.ReasonWaiting, fmt.Sprintf("waiting for %d pods to terminate or complete", len(round.Pending)), now)
	default:
		setCondition(s, nmv1beta1.ConditionDrained, false, nmv1beta1.ReasonDraining, fmt.Sprintf("%d pods still to leave the node", len(round.Pending)), now)
	}
}
