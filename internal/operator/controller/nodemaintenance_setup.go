package controller

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
)

// Index names registered with the manager's field indexer.
const (
	// PodNodeNameIndex indexes pods by spec.nodeName.
	PodNodeNameIndex = "spec.nodeName"
	// MaintenanceNodeNameIndex indexes NodeMaintenances by spec.nodeName.
	MaintenanceNodeNameIndex = "spec.nodeName"
)

// podNodeName is the PodNodeNameIndex function: bound pods by node.
func podNodeName(o client.Object) []string {
	if n := o.(*corev1.Pod).Spec.NodeName; n != "" {
		return []string{n}
	}
	return nil
}

// maintenanceNodeName is the MaintenanceNodeNameIndex function.
func maintenanceNodeName(o client.Object) []string {
	return []string{o.(*nmv1beta1.NodeMaintenance).Spec.NodeName}
}

// SetupWithManager registers the indexes, watches and the controller.
func (r *NodeMaintenanceReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	r.Options.defaults()
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(ctx, &corev1.Pod{}, PodNodeNameIndex, podNodeName); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &nmv1beta1.NodeMaintenance{}, MaintenanceNodeNameIndex, maintenanceNodeName); err != nil {
		return err
	}
	registerMetrics(mgr.GetCache())

	return ctrl.NewControllerManagedBy(mgr).
		Named("nodemaintenance").
		For(&nmv1beta1.NodeMaintenance{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.maintenancesOf(ctx, o.(*corev1.Pod).Spec.NodeName)
		}), builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.(*corev1.Pod).Spec.NodeName != ""
		}))).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.maintenancesOf(ctx, o.GetName())
		})).
		// A NodeMaintenance that ends or fails may free a slot under
		// --max-unavailable: the queued ones decide again at once.
		Watches(&nmv1beta1.NodeMaintenance{}, handler.EnqueueRequestsFromMapFunc(r.queuedMaintenances), builder.WithPredicates(slotChanges)).
		Watches(&policyv1.PodDisruptionBudget{}, handler.EnqueueRequestsFromMapFunc(r.runningMaintenances)).
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			if o.GetNamespace() != lease.Namespace {
				return nil
			}
			node, ok := lease.NodeName(o.GetName())
			if !ok {
				return nil
			}
			return r.maintenancesOf(ctx, node)
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.MaxConcurrentReconciles, SkipNameValidation: &r.Options.SkipNameValidation}).
		Complete(r)
}

// maintenancesOf are the NodeMaintenances of a node: a pod, node or lease
// event of that node wakes them.
func (r *NodeMaintenanceReconciler) maintenancesOf(ctx context.Context, nodeName string) []reconcile.Request {
	if nodeName == "" {
		return nil
	}
	list := &nmv1beta1.NodeMaintenanceList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{MaintenanceNodeNameIndex: nodeName}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
	}
	return reqs
}

// runningMaintenances are the NodeMaintenances still draining: a budget's
// change may let their blocked evictions through.
func (r *NodeMaintenanceReconciler) runningMaintenances(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &nmv1beta1.NodeMaintenanceList{}
	if err := r.Client.List(ctx, list); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Status.Phase == nmv1beta1.MaintenanceRunning {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
		}
	}
	return reqs
}
