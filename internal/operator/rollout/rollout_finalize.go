package rollout

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// childrenGoneRetry is the safety net while the children of a deleted
// rollout are restoring their nodes; their deletion wakes the rollout first.
const childrenGoneRetry = 2 * time.Second

// finalize is the deletion pass: the rollout's MaintenancePlanned leaves
// every node of the set, every child and step Job is deleted, and the
// finalizer is removed once the children are gone, their own finalizers
// having restored their nodes.
func (r *RolloutReconciler) finalize(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(s.ro, nmv1alpha1.RolloutFinalizer) {
		return ctrl.Result{}, nil
	}
	if err := r.unmarkPlanned(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	children, err := r.children(ctx, s.ro)
	if err != nil {
		return ctrl.Result{}, err
	}
	jobs := &batchv1.JobList{}
	if err := r.Client.List(ctx, jobs, client.MatchingLabels{nmv1alpha1.RolloutLabel: s.ro.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list the step Jobs of deleted rollout %s: %w", s.ro.Name, err)
	}
	for i := range jobs.Items {
		if ownedBy(&jobs.Items[i], s.ro) {
			if err := r.deleteObject(ctx, &jobs.Items[i]); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	for _, nm := range children {
		if err := r.deleteObject(ctx, nm); err != nil {
			return ctrl.Result{}, err
		}
	}
	if len(children) > 0 {
		return ctrl.Result{RequeueAfter: childrenGoneRetry}, nil
	}
	controllerutil.RemoveFinalizer(s.ro, nmv1alpha1.RolloutFinalizer)
	if err := r.Client.Update(ctx, s.ro); err != nil {
		return writeFailed(s, fmt.Errorf("remove the finalizer of rollout %s: %w", s.ro.Name, err))
	}
	return ctrl.Result{}, nil
}

// children are the NodeMaintenances the rollout owns, deleted ones too.
func (r *RolloutReconciler) children(ctx context.Context, ro *nmv1alpha1.NodeMaintenanceRollout) ([]*nmv1beta1.NodeMaintenance, error) {
	list := &nmv1beta1.NodeMaintenanceList{}
	if err := r.Client.List(ctx, list, client.MatchingLabels{nmv1alpha1.RolloutLabel: ro.Name}); err != nil {
		return nil, fmt.Errorf("list the NodeMaintenances of deleted rollout %s: %w", ro.Name, err)
	}
	var owned []*nmv1beta1.NodeMaintenance
	for i := range list.Items {
		if ownedBy(&list.Items[i], ro) {
			owned = append(owned, &list.Items[i])
		}
	}
	return owned, nil
}
