package webhook

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/nodeguard"
)

// The node of a create, and the node guards: what the webhook reads of
// the nodes, from the node cache first.

// node reads the node of a create: from the cache (Cache), and live
// when the cache does not have it. A refusal for a missing node rests on the
// live read: the cache may not show a node that joined moments ago. A node
// the cache still shows moments after its deletion is admitted, and the
// controller then fails the maintenance without touching anything (the
// node is gone). Reading the cache first takes a round trip to the API
// server off the path of every create, before the decision and the preview.
func (v *Validator) node(ctx context.Context, name string) (*corev1.Node, error) {
	node := &corev1.Node{}
	return node, readNode(ctx, v.Cache, v.Reader, name, node)
}

// readNode reads node name from cache (when not nil), and live when the
// cache does not have it.
func readNode(ctx context.Context, cache, live client.Reader, name string, node *corev1.Node) error {
	if cache != nil {
		err := cache.Get(ctx, client.ObjectKey{Name: name}, node)
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			logf.FromContext(ctx).Info("cannot read the node from the cache; reading it live", "node", name, "error", err.Error())
		}
	}
	return live.Get(ctx, client.ObjectKey{Name: name}, node)
}

// checkNodeGuards refuses a control-plane node and the last schedulable node
// unless spec.drain allows them (validation.ValidateNodeGuards). It returns
// the nodes it read for the preview to reuse (live.Known's Nodes): every
// node of a cluster within the preview's bound, more than the bound of them
// in a larger one, or nil.
//
// From the cache, it reads at most the bound and one more: in a small
// cluster those are every node, which the guard checks; in a larger one the
// guard reads the two schedulable nodes it needs (nodeguard.Nodes), not
// every node of the cluster on every create.
func (v *Validator) checkNodeGuards(ctx context.Context, nm *nmv1beta1.NodeMaintenance, node *corev1.Node) ([]corev1.Node, error) {
	var listed []corev1.Node
	err := validation.ValidateNodeGuards(node, nm.Spec.Drain, func() ([]corev1.Node, error) {
		if v.Cache == nil {
			all := &corev1.NodeList{}
			err := v.Reader.List(ctx, all)
			listed = all.Items
			return listed, err
		}
		some := &corev1.NodeList{}
		opts := []client.ListOption{client.UnsafeDisableDeepCopy} // the nodes are only read
		if PreviewBounds.Nodes > 0 {
			opts = append(opts, client.Limit(PreviewBounds.Nodes+1))
		}
		if err := v.Cache.List(ctx, some, opts...); err != nil {
			return nil, err
		}
		listed = some.Items
		if PreviewBounds.Nodes == 0 || int64(len(listed)) <= PreviewBounds.Nodes {
			return listed, nil // every node
		}
		return nodeguard.Nodes(ctx, v.Cache, node.Name)
	})
	return listed, err
}
