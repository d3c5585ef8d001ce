package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
)

// ReasonForcedDelete is the event of a pod deleted by spec.drain.onTimeout
// Force, on the pod, its node and the NodeMaintenance.
const ReasonForcedDelete = "ForcedDeletion"

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
// deletes what is left and comes back to let the drain finish. Before the
// deadline, or when nothing is left, the pass goes on.
func (r *NodeMaintenanceReconciler) onTimeout(ctx context.Context, s *scope) (ctrl.Result, error) {
	deadline := drainDeadline(s)
	if deadline.IsZero() || s.round.Done() || r.now().Before(deadline) {
		return ctrl.Result{}, nil
	}
	p := policy(s.nm)
	timeout := p.Timeout.Duration
	action := p.OnTimeout
	if action == "" {
		action = nmv1beta1.DrainTimeoutFail
	}
	left := s.round.Message()
	if left == "" {
		left = fmt.Sprintf("%d pods still had to leave", len(s.round.Pending))
	}
	switch {
	case action == nmv1beta1.DrainTimeoutForce && !r.Options.AllowForceDrain:
		r.markNode(ctx, s, nodestate.DrainStopped) // left in maintenance, no longer draining
		return r.failWith(ctx, s, nmv1beta1.ReasonTimedOut, fmt.Sprintf("the drain of node %s timed out after %s (spec.drain.timeout) and spec.drain.onTimeout is Force, "+
			"but this operator is not allowed to delete pods (install it with allow_force_drain = true, or --allow-force-drain); "+
			"the node is left cordoned and tainted, and deleting this NodeMaintenance restores it. Left on the node: %s", s.node.Name, timeout, left))
	case action == nmv1beta1.DrainTimeoutForce:
		return r.force(ctx, s, timeout)
	case action == nmv1beta1.DrainTimeoutRestore:
		return r.restoreAndFail(ctx, s, nmv1beta1.ReasonTimedOut, "the node was restored when the drain timed out", fmt.Sprintf(
			"the drain of node %s timed out after %s (spec.drain.timeout); the node was restored to its state from before "+
				"the maintenance (spec.drain.onTimeout Restore). Left on the node at the timeout: %s", s.node.Name, timeout, left))
	default:
		r.markNode(ctx, s, nodestate.DrainStopped)
		return r.failWith(ctx, s, nmv1beta1.ReasonTimedOut, fmt.Sprintf("the drain of node %s timed out after %s (spec.drain.timeout); the node is left cordoned and tainted "+
			"(spec.drain.onTimeout Fail), and deleting this NodeMaintenance restores it. Left on the node: %s", s.node.Name, timeout, left))
	}
}

// force deletes the pods the round left that are not terminating yet,
// bypassing their PodDisruptionBudgets, with an event on the pod, the node
// and the NodeMaintenance for each, says so in the status and ends the
// pass. The drain then waits for them as for any terminating pod. With
// nothing to delete, the pass goes on.
func (r *NodeMaintenanceReconciler) force(ctx context.Context, s *scope, timeout time.Duration) (ctrl.Result, error) {
	grace := r.rules(s).Grace()
	deleted := 0
	for i := range s.round.Pending {
		pod := &s.round.Pending[i]
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
			return ctrl.Result{}, fmt.Errorf("delete pod %s/%s after the drain of node %s timed out (spec.drain.onTimeout Force): %w", pod.Namespace, pod.Name, s.node.Name, err)
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
	if deleted == 0 {
		return ctrl.Result{}, nil
	}
	setCondition(s, nmv1beta1.ConditionDrained, false, nmv1beta1.ReasonForced,
		fmt.Sprintf("the drain timed out after %s; the pods left are deleted past their PodDisruptionBudgets (spec.drain.onTimeout Force)", timeout), r.now())
	s.writeAtEnd()
	return ctrl.Result{RequeueAfter: evictedRecently}, nil
}
