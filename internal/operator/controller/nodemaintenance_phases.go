package controller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
)

// A pass is a list of phases run in order (run), as cluster-api's Machine
// controller runs reconcileBootstrap, reconcileInfrastructure, ... A phase
// lets the pass go on with a zero result and no error. It ends the pass with
// an error, with a requeue, or on purpose with scope.end (the maintenance
// failed, its object is gone).
type phase func(ctx context.Context, s *scope) (ctrl.Result, error)

// scope is what one pass works on, and what its phases hand on to the next.
type scope struct {
	nm *nmv1beta1.NodeMaintenance
	// status is the status the pass writes, a copy of nm's.
	status *nmv1beta1.NodeMaintenanceStatus
	// prior is the node's state from before the maintenance; touched says it
	// was recorded when the pass began, so the node may carry our changes.
	prior   nodestate.Prior
	touched bool
	// adopting says that the maintenance is another operator's, whose
	// cordoned and tainted node the pass takes over (adopt) once it holds
	// the lease; in a finalize pass, that prior is the record to restore
	// from (adoptOnDelete). nodemaintenance_takeover.go says how.
	adopting bool
	// released: a finalize pass released the admission ledger's entry.
	released bool
	node     *corev1.Node
	// progress is what earlier passes of this maintenance remember.
	progress *progress
	// plan and round are the drain's, once planned and evicted.
	plan  drain.Plan
	round drain.Round

	// ended stops the pass after the phase that set it (end).
	ended bool
	// write asks run to write status at the end of the pass; writeEvery,
	// when set, throttles a write of counts alone (writeProgress).
	write      bool
	writeEvery time.Duration
	// written is what the pass does once its status is written: events,
	// logs, memory that a pass whose write is lost must not keep.
	written []func()
}

func (r *NodeMaintenanceReconciler) newScope(nm *nmv1beta1.NodeMaintenance) *scope {
	return &scope{nm: nm, status: nm.Status.DeepCopy(), progress: r.progressOf(nm)}
}

// end ends the pass after the current phase.
func (s *scope) end() { s.ended = true }

// writeAtEnd asks for s.status to be written at the end of the pass.
func (s *scope) writeAtEnd() { s.write, s.writeEvery = true, 0 }

// writeProgressAtEnd asks for s.status to be written at the end of the
// pass, a change of the counts alone at most every interval (writeProgress).
func (s *scope) writeProgressAtEnd(interval time.Duration) { s.write, s.writeEvery = true, interval }

// onWritten runs f once the status of the pass is written (or found
// unchanged, or held back by writeProgress), and not when its write fails.
func (s *scope) onWritten(f func()) { s.written = append(s.written, f) }

// writeFailed ends the pass after a failed write: soon again after a
// conflict, at once when the object is gone, with the error otherwise.
// Nothing else is written in that pass.
func (s *scope) writeFailed(err error) (ctrl.Result, error) {
	s.write, s.written = false, nil
	if apierrors.IsConflict(err) {
		// Someone (often our own previous pass) changed the object; the watch
		// brings the new version, the short requeue is the safety net.
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	s.end()
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}

// run runs the phases of one pass, then writes the status once, at the end,
// if a phase asked for it. A pass that ends with an error writes nothing
// more. The writes that must come before a step (the finalizer, a queue's
// grant, the prior-state record, Restoring) are made mid-pass by their
// phases, and say why.
func (r *NodeMaintenanceReconciler) run(ctx context.Context, s *scope, phases []phase) (ctrl.Result, error) {
	res, err := runPhases(ctx, s, phases)
	if err != nil {
		return res, err
	}
	if s.write {
		var wait time.Duration
		if s.writeEvery > 0 {
			wait, err = r.writeProgress(ctx, s, s.writeEvery)
		} else {
			err = r.writeStatus(ctx, s.nm, s.status)
		}
		if err != nil {
			return s.writeFailed(err)
		}
		if wait > 0 && (res.RequeueAfter == 0 || wait < res.RequeueAfter) {
			// Back when the counts held back may be written.
			res.RequeueAfter = wait
		}
	}
	for _, f := range s.written {
		f()
	}
	return res, nil
}

// runPhases runs phases in order until one ends the pass, without the
// status write at the end: restoreAndFail runs the phases of a restore
// inside the pass that began it this way.
func runPhases(ctx context.Context, s *scope, phases []phase) (ctrl.Result, error) {
	for _, p := range phases {
		if res, err := p(ctx, s); err != nil || !res.IsZero() || s.ended {
			return res, err
		}
	}
	return ctrl.Result{}, nil
}
