package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
)

// patchAttempts bounds the re-reads of a node whose patch lost a race.
const patchAttempts = 5

// restoreAndFail ends the maintenance as Failed and gives the node back:
// restored to its recorded state, the lease released. It says so in three
// steps, so that no observer sees Failed before the node is back and no pass
// cut off halfway loses the node's state: the status first says Restoring
// (still Running), then the node is restored, then the status says Failed.
// A pass that finds Restoring finishes the job (restorePending).
func (r *NodeMaintenanceReconciler) restoreAndFail(ctx context.Context, s *scope, reason, why, msg string) (ctrl.Result, error) {
	s.status.LastError = msg
	setRestoring(s, reason, why, msg, r.now())
	// Written at once (mid-pass), before the node is touched; Failed is
	// written at the end of the pass, once it is back.
	if err := r.writeStatus(ctx, s.nm, s.status); err != nil {
		return s.writeFailed(err) // nothing touched yet: the next pass decides again
	}
	return runPhases(ctx, s, r.finishRestore())
}

// finishRestore restores the node from its record (if the record is still
// there), releases the lease, and fails the maintenance with the reason and
// lastError restoreAndFail recorded: the rest of restoreAndFail's pass, and
// the pass that finds its restore pending.
func (r *NodeMaintenanceReconciler) finishRestore() []phase {
	return []phase{r.restoreFromRecord, r.releaseLease, r.failRestored}
}

// restoreFromRecord puts the node back as the prior-state record says
// (restoreNode). An unreadable record restores "as before any maintenance":
// uncordoned, our taints and label removed; the Failed status said so.
func (r *NodeMaintenanceReconciler) restoreFromRecord(ctx context.Context, s *scope) (ctrl.Result, error) {
	prior, touched, err := priorState(s.nm)
	if err != nil {
		log.FromContext(ctx).Error(err, "restoring node with default prior state", "node", s.nm.Spec.NodeName)
		prior, touched = nodestate.Prior{}, true
	}
	if !touched && s.adopting {
		prior, touched = s.prior, true // another operator's maintenance, deleted before it was adopted
	}
	if touched {
		if err := r.restoreNode(ctx, s.nm, s.nm.Spec.NodeName, prior); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// releaseLease gives up the node's lease.
func (r *NodeMaintenanceReconciler) releaseLease(ctx context.Context, s *scope) (ctrl.Result, error) {
	return ctrl.Result{}, r.Leases.Release(ctx, s.nm.Spec.NodeName)
}

// failRestored fails the maintenance whose node is back, as restoreAndFail
// asked (restoring).
func (r *NodeMaintenanceReconciler) failRestored(ctx context.Context, s *scope) (ctrl.Result, error) {
	why, reason := restoring(s.status)
	setRestored(s, why, r.now())
	return r.failWith(ctx, s, reason, s.status.LastError)
}

// restoreNode puts the node back as recorded (its spec and labels, then its
// lifecycle conditions) and removes the record, so a later restore never
// undoes what someone did to the node afterwards. A node that no longer
// exists has nothing to restore.
func (r *NodeMaintenanceReconciler) restoreNode(ctx context.Context, nm *nmv1beta1.NodeMaintenance, nodeName string, prior nodestate.Prior) error {
	err := r.patchNode(ctx, nodeName, func(n *corev1.Node) bool { return nodestate.Restore(n, prior) })
	if err == nil {
		err = r.restoreConditions(ctx, nodeName, prior)
	}
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
		note := "Node restored: maintenance taints and label removed"
		switch {
		case prior.Adopted:
			note = "Node uncordoned the medik8s way (the maintenance was adopted from another operator; its prior state was not recorded): medik8s taints and label removed"
		case !prior.Unschedulable:
			note = "Node uncordoned: maintenance taints and label removed"
		}
		r.Recorder.Eventf(node, nm, corev1.EventTypeNormal, ReasonUncordon, "Uncordon", "%s (maintenance %s)", note, nm.Name)
	}
	// The record goes at once (mid-pass), right after the node is back. An
	// update (the operator may update its NodeMaintenances, not patch them),
	// retried on the live object after a conflict: a status write of the
	// same pass may have come in between.
	for attempt := 1; ; attempt++ {
		if _, ok := nm.Annotations[nodestate.PriorStateAnnotation]; !ok {
			return nil
		}
		delete(nm.Annotations, nodestate.PriorStateAnnotation)
		err := r.Client.Update(ctx, nm)
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err) || attempt == patchAttempts:
			return fmt.Errorf("clear the prior node state of NodeMaintenance %s: %w", nm.Name, err)
		}
		live := &nmv1beta1.NodeMaintenance{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(nm), live); err != nil {
			return client.IgnoreNotFound(err)
		}
		*nm = *live
	}
}

// patchNode applies change to the node with a merge patch guarded by the
// resourceVersion: taints are a list, and a concurrent change to it must make
// us re-read and retry rather than overwrite someone else's taint.
func (r *NodeMaintenanceReconciler) patchNode(ctx context.Context, name string, change func(*corev1.Node) bool) error {
	_, err := r.Recent.Write(ctx, r.Client, r.APIReader, name, patchAttempts, func(node *corev1.Node) (bool, error) {
		orig := node.DeepCopy()
		if !change(node) {
			return false, nil
		}
		return true, r.Client.Patch(ctx, node, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		return fmt.Errorf("patch node %s: %w", name, err)
	}
	return nil
}

// priorState reads the record of the node's state from before the
// maintenance. touched reports that the record exists (the node may carry
// our changes), even when it cannot be read.
func priorState(nm *nmv1beta1.NodeMaintenance) (prior nodestate.Prior, touched bool, err error) {
	v, ok := nm.Annotations[nodestate.PriorStateAnnotation]
	if !ok {
		return nodestate.Prior{}, false, nil
	}
	p, err := nodestate.Decode(v)
	if err != nil {
		return nodestate.Prior{}, true, fmt.Errorf("NodeMaintenance %s: %w", nm.Name, err)
	}
	return p, true, nil
}
