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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
)

// attempts bounds the re-reads of a node whose patch lost a race.
const attempts = 5

// Patch reads node name (through c, from the cache, then live through
// live after a conflict), asks edit what to change, and patches the node's
// status with exactly those conditions (nodestate.ConditionsPatch): a
// strategic merge patch keyed on the condition type, so the kubelet's
// conditions and everyone else's are never rewritten, guarded by the
// resourceVersion read. It reports whether it patched; a node that does not
// exist is an error apierrors.IsNotFound recognises.
func Patch(ctx context.Context, c client.Client, live client.Reader, name string, edit func(*corev1.Node) []nodestate.ConditionEdit) (bool, error) {
	var reader client.Reader = c
	var lastErr error
	for range attempts {
		node := &corev1.Node{}
		if err := reader.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return false, err
		}
		edits := edit(node)
		if len(edits) == 0 {
			return false, nil
		}
		patch := client.RawPatch(types.StrategicMergePatchType, nodestate.ConditionsPatch(node.ResourceVersion, edits))
		lastErr = c.Status().Patch(ctx, node, patch)
		if lastErr == nil {
			return true, nil
		}
		if !apierrors.IsConflict(lastErr) {
			break
		}
		reader = live // the cache was behind, or someone wrote in between
	}
	return false, fmt.Errorf("write the lifecycle conditions of node %s: %w", name, lastErr)
}
