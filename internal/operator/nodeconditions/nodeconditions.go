// Package nodeconditions writes the node lifecycle conditions of KEP-5683
// that the operator owns (package nodestate decides which and how) onto a
// Node's status subresource. Both controllers use it: the NodeMaintenance
// controller for MaintenanceInProgress, DrainInProgress and Drained, the
// rollout controller for MaintenancePlanned.
package nodeconditions

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/nodewrites"
)

// attempts bounds the tries of a patch that loses races (nodewrites.Write).
const attempts = 5

// Patch reads node name (through c, from the cache as the operator's recent
// writes left it, then live through live after a conflict), asks edit what
// to change, and patches the node's status with exactly those conditions
// (nodestate.ConditionsPatch): a strategic merge patch keyed on the
// condition type, so the kubelet's conditions and everyone else's are never
// rewritten, guarded by the resourceVersion read. The node it writes goes
// into recent. It reports whether it patched; a node that does not exist is
// an error apierrors.IsNotFound recognises.
func Patch(ctx context.Context, c client.Client, live client.Reader, recent *nodewrites.Recent, name string, edit func(*corev1.Node) []nodestate.ConditionEdit) (bool, error) {
	wrote, err := recent.Write(ctx, c, live, name, attempts, func(node *corev1.Node) (bool, error) {
		edits := edit(node)
		if len(edits) == 0 {
			return false, nil
		}
		patch := client.RawPatch(types.StrategicMergePatchType, nodestate.ConditionsPatch(node.ResourceVersion, edits))
		return true, c.Status().Patch(ctx, node, patch)
	})
	if err != nil {
		return false, fmt.Errorf("write the lifecycle conditions of node %s: %w", name, err)
	}
	return wrote, nil
}
