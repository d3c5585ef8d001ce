package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
)

// holdLease obtains or renews the node lease. When it cannot, it records why
// in the status (written at the end of the pass) and ends the pass with a
// retry. After the node was touched, each failure counts; more than
// nmv1beta1.MaxLeaseErrors in a row restore the node and fail the
// maintenance.
func (r *NodeMaintenanceReconciler) holdLease(ctx context.Context, s *scope) (ctrl.Result, error) {
	p := s.progress
	if !p.lastLeaseFailed.IsZero() && r.now().Sub(p.lastLeaseFailed) < r.Options.LeaseRetryInterval {
		// Pod events may wake us often; a lease failure is retried (and
		// counted) at most once per interval.
		return ctrl.Result{RequeueAfter: r.Options.LeaseRetryInterval - r.now().Sub(p.lastLeaseFailed)}, nil
	}
	err := r.Leases.ObtainFor(ctx, s.node.Name, owner(s.nm))
	if err == nil {
		p.lastLeaseFailed = time.Time{}
		return ctrl.Result{}, nil
	}
	p.lastLeaseFailed = r.now()
	if s.adopting {
		err = fmt.Errorf("node %s is in maintenance by another operator (cordoned, medik8s drain taint) and its lease could not be taken over, so this operator has not touched the node yet: %w", s.node.Name, err)
	}
	status := s.status
	if status.Phase == "" {
		status.Phase = nmv1beta1.MaintenanceRunning
	}
	status.LastError = err.Error()
	setCondition(s, nmv1beta1.ConditionLeaseHeld, false, nmv1beta1.ReasonLeaseNotHeld, err.Error(), r.now())
	if s.touched {
		status.ErrorOnLeaseCount++
	}
	var held *lease.HeldError
	if errors.As(err, &held) || s.touched {
		r.Recorder.Eventf(s.nm, nil, corev1.EventTypeWarning, ReasonLeaseNotHeld, "Lease", "%s", err.Error())
	}
	if s.touched && status.ErrorOnLeaseCount > nmv1beta1.MaxLeaseErrors {
		return r.restoreAndFail(ctx, s, nmv1beta1.ReasonFailed, "the node was restored when the lease could not be held", fmt.Sprintf(
			"could not hold the lease on node %s %d times in a row (last error: %v); the node was restored and the maintenance stopped. Delete this NodeMaintenance and create it again to retry",
			s.node.Name, status.ErrorOnLeaseCount, err))
	}
	s.writeAtEnd()
	return ctrl.Result{RequeueAfter: r.Options.LeaseRetryInterval}, nil
}

// keepMaintenance is the Succeeded pass: it holds the lease of the drained
// node for as long as the maintenance lasts.
func (r *NodeMaintenanceReconciler) keepMaintenance() []phase {
	return append(r.observe(), r.markDrained, r.leaseKept)
}

// leaseKept says in the status that the lease is held, and comes back to
// renew it.
func (r *NodeMaintenanceReconciler) leaseKept(_ context.Context, s *scope) (ctrl.Result, error) {
	s.status.ErrorOnLeaseCount, s.status.LastError = 0, ""
	setLeaseHeld(s, r.now())
	if !meta.IsStatusConditionTrue(s.status.Conditions, nmv1beta1.ConditionDrained) {
		// A maintenance that succeeded before conditions existed.
		setCordoned(s, r.now())
		setDrained(s, r.now())
	}
	s.writeAtEnd()
	return ctrl.Result{RequeueAfter: r.Leases.RenewInterval()}, nil
}
