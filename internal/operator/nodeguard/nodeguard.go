// Package nodeguard applies the node guards (validation.ValidateNodeGuards)
// on the operator's informer cache of nodes, for the webhook at create and
// the controller before the cordon. The cache indexes the nodes by whether
// they take pods (SchedulableIndex), so that the guard of the last
// schedulable node reads one or two nodes, not every node of the cluster:
// in a cluster of 5000 nodes, a list of all of them per create was most of
// the webhook's own CPU.
package nodeguard

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
)

// SchedulableIndex is the field index of the cached nodes that take pods
// (validation.Unschedulable is empty): its one value is "true".
const SchedulableIndex = "nodemaintenance.medik8s.io/schedulable"

// Register adds SchedulableIndex to the cache's node informer. Call it
// before the cache starts.
func Register(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &corev1.Node{}, SchedulableIndex, Schedulable)
}

// Schedulable is SchedulableIndex's function: "true" for a node that takes
// pods, nothing for the others. It reads only the node object, so the index
// changes with the node.
func Schedulable(o client.Object) []string {
	if validation.Unschedulable(o.(*corev1.Node)) != "" {
		return nil
	}
	return []string{"true"}
}

// Nodes returns enough of the cached nodes to decide whether node name is
// the last schedulable one (validation.ValidateLastSchedulable): two
// schedulable nodes of the index when one of them is not name, which
// decides as every node would; else every node, which the refusal names.
// cache must have SchedulableIndex. The nodes are read without copies: the
// caller only reads them.
func Nodes(ctx context.Context, cache client.Reader, name string) ([]corev1.Node, error) {
	some := &corev1.NodeList{}
	if err := cache.List(ctx, some, client.MatchingFields{SchedulableIndex: "true"}, client.Limit(2), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	for i := range some.Items {
		if some.Items[i].Name != name {
			return some.Items, nil
		}
	}
	all := &corev1.NodeList{}
	if err := cache.List(ctx, all, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	return all.Items, nil
}
