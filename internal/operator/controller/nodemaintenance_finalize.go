package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/ledger"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/notify"
)

// finalize is the pass of a deleted NodeMaintenance: it restores the node,
// releases the lease and lets the object go.
func (r *NodeMaintenanceReconciler) finalize() []phase {
	return []phase{r.holdsFinalizer, r.adoptOnDelete, r.restoreFromRecord, r.releaseTakenLease, r.leaveLedger, r.removeFinalizer}
}

// holdsFinalizer ends the pass of a deleted NodeMaintenance that is not ours
// to finalize (any more), forgetting it.
func (r *NodeMaintenanceReconciler) holdsFinalizer(_ context.Context, s *scope) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(s.nm, nmv1beta1.NodeMaintenanceFinalizer) {
		r.forget(s.nm)
		s.end()
	}
	return ctrl.Result{}, nil
}

// releaseTakenLease releases the lease, unless the maintenance is queued: it
// never took the lease, and there is nothing to release. The lease of
// another operator's maintenance, restored on its deletion (adoptOnDelete),
// is released even so.
func (r *NodeMaintenanceReconciler) releaseTakenLease(ctx context.Context, s *scope) (ctrl.Result, error) {
	if queued(s.nm) && !s.adopting {
		return ctrl.Result{}, nil
	}
	return r.releaseLease(ctx, s)
}

// leaveLedger forgets the maintenance's admission (releaseAdmission).
func (r *NodeMaintenanceReconciler) leaveLedger(ctx context.Context, s *scope) (ctrl.Result, error) {
	s.released = r.releaseAdmission(ctx, s.nm.Spec.NodeName, s.nm.Name)
	return ctrl.Result{}, nil
}

// removeFinalizer lets the object go, last: the node and the lease are back.
func (r *NodeMaintenanceReconciler) removeFinalizer(ctx context.Context, s *scope) (ctrl.Result, error) {
	controllerutil.RemoveFinalizer(s.nm, nmv1beta1.NodeMaintenanceFinalizer)
	if err := r.Client.Update(ctx, s.nm); err != nil {
		return s.writeFailed(err)
	}
	r.Recorder.Eventf(s.nm, nil, corev1.EventTypeNormal, ReasonRemovedMaintenance, "Restore",
		"Maintenance of node %s ended; the node was restored", s.nm.Spec.NodeName)
	if !queued(s.nm) && s.nm.Status.Phase != "" {
		// A maintenance that waited in the queue never had a node to give back.
		r.notifyMaintenance(s.nm, notify.MaintenanceRestored, nil)
	}
	r.finalizedHere(s.nm, s.released)
	return ctrl.Result{}, nil
}

// releaseAdmission forgets the webhook's ledger entry of the NodeMaintenance
// name (on node, or any node when node is empty), so that its node is free
// for the next create at once. It runs when a maintenance is finalized, and
// again when its object is gone: one deleted before the operator added the
// finalizer is never finalized, and its entry would otherwise hold the node
// (and a slot of --max-unavailable) until ledger.TTL.
// It reports whether the entry is released (or there was none).
func (r *NodeMaintenanceReconciler) releaseAdmission(ctx context.Context, node, name string) bool {
	if r.Admissions == nil {
		return true
	}
	if err := r.Admissions.Release(ctx, node, name); err != nil {
		// Not worth holding anything for: the entry expires on its own.
		log.FromContext(ctx).Info("cannot release the admission ledger entry; it expires after "+ledger.TTL.String(),
			"nodeMaintenance", name, "node", node, "error", err.Error())
		return false
	}
	return true
}
