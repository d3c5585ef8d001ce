package controller

import (
	"context"
	"errors"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
)

// MaintenanceNodeNameIndex indexes NodeMaintenances by spec.nodeName, in
// the manager's field indexer.
const MaintenanceNodeNameIndex = "spec.nodeName"

// NodePods are the pods of the nodes being drained (nodepods.Cache). A
// NodeMaintenance holds its node's pods from the pass that may start its
// drain until it ends (drains); the node's informer runs while anyone holds it.
type NodePods interface {
	// Hold starts (or keeps) the informer of node's pods for the
	// NodeMaintenance named holder, until Release.
	Hold(holder, node string)
	// Pods returns the pods on node once its informer has synced, waiting
	// for that until ctx ends. ok false is no answer, not "no pods": nothing
	// may be decided from it.
	Pods(ctx context.Context, node string) (pods []corev1.Pod, ok bool)
	// Release lets go of the node holder holds, if any.
	Release(holder string)
	// Changes names a node whose pods changed, or whose informer synced.
	Changes() <-chan event.TypedGenericEvent[string]
}

// maintenanceNodeName is the MaintenanceNodeNameIndex function.
func maintenanceNodeName(o client.Object) []string {
	return []string{o.(*nmv1beta1.NodeMaintenance).Spec.NodeName}
}

// SetupWithManager registers the index, watches and the controller.
func (r *NodeMaintenanceReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	r.Options.defaults()
	if r.Pods == nil {
		return errors.New("the NodeMaintenance reconciler has no NodePods to read the pods of the nodes it drains from")
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &nmv1beta1.NodeMaintenance{}, MaintenanceNodeNameIndex, maintenanceNodeName); err != nil {
		return err
	}
	registerMetrics(mgr.GetCache())

	return ctrl.NewControllerManagedBy(mgr).
		Named("nodemaintenance").
		For(&nmv1beta1.NodeMaintenance{}).
		// Only the pods of the nodes being drained are watched, by the
		// node's informer (NodePods): a change wakes that node's maintenances.
		WatchesRawSource(source.Channel(r.Pods.Changes(), handler.TypedEnqueueRequestsFromMapFunc(r.maintenancesOf))).
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
// event of that node, or the sync of its pod informer, wakes them.
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
