package webhook

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
)

// The node of a create, and the node guards: what the webhook reads of
// the nodes, from the node cache first.

// node reads the node of a create: from the node cache (Nodes), and live
// when the cache does not have it. A refusal for a missing node rests on the
// live read: the cache may not show a node that joined moments ago. A node
// the cache still shows moments after its deletion is admitted, and the
// controller then fails the maintenance without touching anything (the
// node is gone). Reading the cache first takes a round trip to the API
// server off the path of every create, before the decision and the preview.
func (v *Validator) node(ctx context.Context, name string) (*corev1.Node, error) {
	node := &corev1.Node{}
	if v.Nodes != nil {
		err := v.Nodes.Get(ctx, client.ObjectKey{Name: name}, node)
		if err == nil {
			return node, nil
		}
		if !apierrors.IsNotFound(err) {
			logf.FromContext(ctx).Info("cannot read the node from the cache; reading it live", "node", name, "error", err.Error())
		}
	}
	return node, v.Reader.Get(ctx, client.ObjectKey{Name: name}, node)
}

// checkNodeGuards refuses a control-plane node and the last schedulable node
// unless spec.drain allows them (validation.ValidateNodeGuards). It returns
// every node of the cluster when it read them (the preview reuses them),
// else nil.
func (v *Validator) checkNodeGuards(ctx context.Context, nm *nmv1beta1.NodeMaintenance, node *corev1.Node) ([]corev1.Node, error) {
	reader := v.Nodes
	if reader == nil {
		reader = v.Reader
	}
	var listed []corev1.Node
	err := validation.ValidateNodeGuards(node, nm.Spec.Drain, func() ([]corev1.Node, error) {
		all := &corev1.NodeList{}
		// Without copies from the informer cache: the nodes are only read.
		if err := reader.List(ctx, all, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		listed = all.Items
		return listed, nil
	})
	return listed, err
}
