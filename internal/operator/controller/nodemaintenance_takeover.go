package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
)

// Taking over a maintenance that another medik8s-compatible operator (the
// medik8s node-maintenance-operator) started, for example after it was
// uninstalled and this one installed: the NodeMaintenance says Running or
// Succeeded, its node is cordoned and carries the medik8s taints, the lease
// medik8s-leases/node-<node> is held by node-maintenance (the holder both
// operators use), and there is no prior-state record of this operator.
//
// The maintenance is carried on, not started again: once the lease is held
// (taken over when it is node-maintenance's or expired; a live lease of
// another holder is waited for, the node untouched), the pass writes a
// record that says the maintenance was adopted (nodestate.AdoptedPrior)
// instead of recording the node as it is, which would keep it cordoned
// after the restore. From then on it is a maintenance like any other: the
// drain goes on with the pods left (those already evicted are gone, those
// terminating are waited for, not evicted again), the counts the other
// operator wrote are kept, and the restore on deletion follows the record:
// uncordoned, the medik8s taints and label removed, the lease released.
// The Cordoned condition (reason Adopted) says that the prior state was not
// recorded.

// adoptedMessage is the Cordoned condition of an adopted maintenance.
func adoptedMessage(node string) string {
	return fmt.Sprintf("node %s is cordoned and tainted for the maintenance, which was adopted from another operator: "+
		"the prior node state was not recorded, so deleting this NodeMaintenance restores node %s the medik8s way "+
		"(uncordoned, the medik8s taints and the exclude-from-remediation label removed)", node, node)
}

// startedElsewhere reports whether nm is a maintenance that another operator
// started on node and this one has not touched: no prior-state record, a
// phase written (Running or Succeeded; a Failed medik8s maintenance has
// given its node back already), no Cordoned condition (this operator sets it
// on every maintenance whose node it touched, and keeps it after the
// restore), and the medik8s drain taint on the node.
func startedElsewhere(nm *nmv1beta1.NodeMaintenance, node *corev1.Node) bool {
	if _, recorded := nm.Annotations[nodestate.PriorStateAnnotation]; recorded {
		return false
	}
	switch nm.Status.Phase {
	case nmv1beta1.MaintenanceRunning, nmv1beta1.MaintenanceSucceeded:
	default:
		return false
	}
	if meta.FindStatusCondition(nm.Status.Conditions, nmv1beta1.ConditionCordoned) != nil {
		return false
	}
	return nodestate.HasDrainTaint(node)
}

// detectTakeover notes (s.adopting) that the maintenance is another
// operator's, to be adopted once the lease is held. Until then the node is
// not touched and the guards of a new maintenance do not apply: the node is
// in maintenance already.
func (r *NodeMaintenanceReconciler) detectTakeover(_ context.Context, s *scope) (ctrl.Result, error) {
	s.adopting = !s.touched && startedElsewhere(s.nm, s.node)
	return ctrl.Result{}, nil
}

// adopt writes the record of an adopted maintenance (nodestate.AdoptedPrior)
// at once (mid-pass), as enterMaintenance writes its record, before the
// pass touches the node; from then on the maintenance is this operator's.
func (r *NodeMaintenanceReconciler) adopt(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !s.adopting {
		return ctrl.Result{}, nil
	}
	prior := nodestate.AdoptedPrior(s.node, s.nm.CreationTimestamp.Time)
	if res, err := r.writeRecord(ctx, s, prior); err != nil || !res.IsZero() || s.ended {
		return res, err
	}
	s.prior, s.touched, s.adopting = prior, true, false
	setCordoned(s, r.now())
	s.writeAtEnd()
	r.Recorder.Eventf(s.nm, nil, corev1.EventTypeNormal, ReasonAdoptedMaintenance, "Adopt",
		"Maintenance of node %s adopted from another operator (phase %s); the prior node state was not recorded: deleting this NodeMaintenance restores the node the medik8s way",
		s.node.Name, s.status.Phase)
	log.FromContext(ctx).Info("maintenance adopted from another operator", "node", s.node.Name, "phase", s.status.Phase)
	return ctrl.Result{}, nil
}

// adoptOnDelete lets the deletion of a maintenance that another operator
// started, and this one never adopted (it was deleted first), restore the
// node the medik8s way, as that operator would have. It also asks that the
// lease be node-maintenance's, the holder both operators use: this
// operator's own restore releases it, so a finalize pass retried after its
// restore never mistakes a drain taint from before the maintenance
// (recorded and kept) for another operator's.
func (r *NodeMaintenanceReconciler) adoptOnDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	if _, recorded := s.nm.Annotations[nodestate.PriorStateAnnotation]; recorded {
		return ctrl.Result{}, nil
	}
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: s.nm.Spec.NodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("read node %s: %w", s.nm.Spec.NodeName, err)
	}
	if !startedElsewhere(s.nm, node) {
		return ctrl.Result{}, nil
	}
	holder, _, err := r.Leases.Holder(ctx, node.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if holder == lease.Holder {
		s.prior, s.adopting = nodestate.AdoptedPrior(node, s.nm.CreationTimestamp.Time), true
	}
	return ctrl.Result{}, nil
}

// adoptedTotal is totalPods of an adopted maintenance whose operator wrote
// none this CRD keeps (the medik8s operator spells it totalpods): the pods
// on the node now, and those of the evictionPods it counted that are gone.
func adoptedTotal(podsNow, evictionPods, pendingNow int) int {
	return podsNow + max(0, evictionPods-pendingNow)
}
