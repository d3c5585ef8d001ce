package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/ledger"
)

// patchAttempts bounds the re-reads of a node whose patch lost a race.
const patchAttempts = 5

// finalize restores the node, releases the lease and lets the object go.
func (r *NodeMaintenanceReconciler) finalize(ctx context.Context, nm *nmv1beta1.NodeMaintenance) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(nm, nmv1beta1.NodeMaintenanceFinalizer) {
		r.forget(nm)
		return ctrl.Result{}, nil
	}
	prior, touched, err := priorState(nm)
	if err != nil {
		// Without the record the restore is "as before any maintenance":
		// uncordoned, our taints and label removed. The Failed status said so.
		log.FromContext(ctx).Error(err, "restoring node with default prior state", "node", nm.Spec.NodeName)
		prior, touched = nodestate.Prior{}, true
	}
	if touched {
		if err := r.restoreNode(ctx, nm, nm.Spec.NodeName, prior); err != nil {
			return ctrl.Result{}, err
		}
	}
	// A queued maintenance never took the lease: nothing to release.
	if !queued(nm) {
		if err := r.Leases.Release(ctx, nm.Spec.NodeName); err != nil {
			return ctrl.Result{}, err
		}
	}
	r.releaseAdmission(ctx, nm.Spec.NodeName, nm.Name)
	controllerutil.RemoveFinalizer(nm, nmv1beta1.NodeMaintenanceFinalizer)
	if err := r.Client.Update(ctx, nm); err != nil {
		return requeueOnConflict(err)
	}
	r.Recorder.Eventf(nm, nil, corev1.EventTypeNormal, ReasonRemovedMaintenance, "Restore",
		"Maintenance of node %s ended; the node was restored", nm.Spec.NodeName)
	r.forget(nm)
	return ctrl.Result{}, nil
}

// restoreNode puts the node back as recorded and removes the record, so a
// later restore never undoes what someone did to the node afterwards. A node
// that no longer exists has nothing to restore.
func (r *NodeMaintenanceReconciler) restoreNode(ctx context.Context, nm *nmv1beta1.NodeMaintenance, nodeName string, prior nodestate.Prior) error {
	err := r.patchNode(ctx, nodeName, func(n *corev1.Node) bool { return nodestate.Restore(n, prior) })
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
		note := "Node restored: maintenance taints and label removed"
		if !prior.Unschedulable {
			note = "Node uncordoned: maintenance taints and label removed"
		}
		r.Recorder.Eventf(node, nm, corev1.EventTypeNormal, ReasonUncordon, "Uncordon", "%s (maintenance %s)", note, nm.Name)
	}
	// An update (the operator may update its NodeMaintenances, not patch
	// them), retried on the live object after a conflict: a status write of
	// the same pass may have come in between.
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
	var reader client.Reader = r.Client
	var lastErr error
	for range patchAttempts {
		node := &corev1.Node{}
		if err := reader.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		orig := node.DeepCopy()
		if !change(node) {
			return nil
		}
		lastErr = r.Client.Patch(ctx, node, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
		if lastErr == nil || !apierrors.IsConflict(lastErr) {
			break
		}
		// The cache was behind; read the live node.
		reader = r.APIReader
	}
	if lastErr != nil {
		return fmt.Errorf("patch node %s: %w", name, lastErr)
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

// releaseAdmission forgets the webhook's ledger entry of the NodeMaintenance
// name (on node, or any node when node is empty), so that its node is free
// for the next create at once. It runs when a maintenance is finalized, and
// again when its object is gone: one deleted before the operator added the
// finalizer is never finalized, and its entry would otherwise hold the node
// (and a slot of --max-unavailable) until ledger.TTL.
func (r *NodeMaintenanceReconciler) releaseAdmission(ctx context.Context, node, name string) {
	if r.Admissions == nil {
		return
	}
	if err := r.Admissions.Release(ctx, node, name); err != nil {
		// Not worth holding anything for: the entry expires on its own.
		log.FromContext(ctx).Info("cannot release the admission ledger entry; it expires after "+ledger.TTL.String(),
			"nodeMaintenance", name, "node", node, "error", err.Error())
	}
}
