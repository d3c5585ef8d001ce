package rollout

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
)

// SetupWithManager registers the controller and its watches: the rollouts,
// their children (by owner), their step Jobs (by label, in any namespace)
// and the nodes (which wake the rollouts in progress that hold them).
func (r *RolloutReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Scheme == nil {
		r.Scheme = mgr.GetScheme()
	}
	registerMetrics(mgr.GetCache())
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodemaintenancerollout").
		For(&nmv1alpha1.NodeMaintenanceRollout{}).
		Owns(&nmv1beta1.NodeMaintenance{}).
		Watches(&batchv1.Job{}, handler.EnqueueRequestsFromMapFunc(rolloutOfJob)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.rolloutsOfNode), builder.WithPredicates(serviceChanges)).
		WithOptions(controller.Options{SkipNameValidation: &r.SkipNameValidation}).
		Complete(r)
}

// rolloutOfJob is the rollout a step Job's label names.
func rolloutOfJob(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[nmv1alpha1.RolloutLabel]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
}

// rolloutsOfNode are the rollouts in progress whose set holds the node: a
// node cordoned, uncordoned or Ready again may free or take a slot, or end
// a restore. Rollouts that ended are not woken.
func (r *RolloutReconciler) rolloutsOfNode(ctx context.Context, o client.Object) []reconcile.Request {
	list := &nmv1alpha1.NodeMaintenanceRolloutList{}
	if err := r.Client.List(ctx, list); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		ro := &list.Items[i]
		if ro.Status.Phase == nmv1alpha1.RolloutSucceeded && ro.DeletionTimestamp.IsZero() {
			continue
		}
		for _, row := range ro.Status.Nodes {
			if row.Name == o.GetName() {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: ro.Name}})
				break
			}
		}
	}
	return reqs
}

// serviceChanges lets through the node events a rollout decides on: a node
// that appears, goes, or changes whether it is in service (cordoned,
// Ready). Heartbeats and the rest of a node's status are left out.
var serviceChanges = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, oldOK := e.ObjectOld.(*corev1.Node)
		cur, curOK := e.ObjectNew.(*corev1.Node)
		if !oldOK || !curOK {
			return true
		}
		return old.Spec.Unschedulable != cur.Spec.Unschedulable || validation.NodeReady(old) != validation.NodeReady(cur)
	},
}
