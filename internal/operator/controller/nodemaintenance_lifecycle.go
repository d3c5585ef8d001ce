package controller

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/nodeconditions"
)

// The node lifecycle conditions of KEP-5683 on the maintained node
// (nodestate.MaintenanceConditions has the table): MaintenanceInProgress
// from the cordon on, DrainInProgress while the drain goes on, Drained once
// it is over; the restore gives back what was there before
// (nodestate.RestoreConditions). The maintenance of a rollout's node also
// takes that rollout's MaintenancePlanned off, in the same patch: the
// rollout hands it over when it creates the maintenance, so that the node
// goes from planned to in progress in one write. They only report: a pass
// whose write of them fails says so in the log and goes on, and the next
// pass writes them.
//
// +kubebuilder:rbac:groups="",resources=nodes/status,verbs=patch

// markRound writes the conditions the drain round says, Draining or
// DrainDone once every pod that had to leave is gone, after the pass's
// status: the node never says Drained before the NodeMaintenance says
// Succeeded, and nothing comes between the round's evictions and the status
// that counts them. A pass cut off before it leaves them to the next one.
func (r *NodeMaintenanceReconciler) markRound(ctx context.Context, s *scope) (ctrl.Result, error) {
	stage := nodestate.Draining
	if s.round.Done() {
		stage = nodestate.DrainDone
	}
	s.onWritten(func() { r.markNode(ctx, s, stage) })
	return ctrl.Result{}, nil
}

// markDrained keeps DrainDone on the node of a Succeeded maintenance (one
// that succeeded under an operator that did not write them gets them now).
func (r *NodeMaintenanceReconciler) markDrained(ctx context.Context, s *scope) (ctrl.Result, error) {
	r.markNode(ctx, s, nodestate.DrainDone)
	return ctrl.Result{}, nil
}

// markNode writes the conditions of stage over the node's, where the
// maintenance may (nodestate.Prior.MayWrite), and removes the
// MaintenancePlanned of the rollout that owns the maintenance, if any: a
// failure is logged, not returned, so that the drain never waits for a
// report of itself.
func (r *NodeMaintenanceReconciler) markNode(ctx context.Context, s *scope, stage nodestate.Stage) {
	want := nodestate.MaintenanceConditions(s.nm.Name, stage)
	rollout := nmv1alpha1.ControllingRollout(s.nm)
	planned := func(c corev1.NodeCondition) bool {
		return rollout != "" && strings.HasPrefix(c.Message, nodestate.PlannedBy(rollout))
	}
	_, err := nodeconditions.Patch(ctx, r.Client, r.APIReader, r.Recent, s.nm.Spec.NodeName, func(n *corev1.Node) []nodestate.ConditionEdit {
		edits := nodestate.SetConditions(n.Status.Conditions, want, s.prior.MayWrite, r.now())
		return append(edits, nodestate.RemoveConditions(n.Status.Conditions, plannedType, planned)...)
	})
	if err != nil && !apierrors.IsNotFound(err) {
		log.FromContext(ctx).Error(err, "the node's lifecycle conditions are not written; the next pass tries again",
			"node", s.nm.Spec.NodeName, "nodeMaintenance", s.nm.Name)
	}
}

// plannedType is the condition a rollout plans its nodes with.
var plannedType = []corev1.NodeConditionType{corev1.NodeMaintenancePlanned}

// restoreConditions gives the node back the lifecycle conditions prior
// recorded (nodestate.RestoreConditions). Unlike markNode it returns its
// error: the record must outlive the operator's conditions, or they would
// stay on the node for good.
func (r *NodeMaintenanceReconciler) restoreConditions(ctx context.Context, nodeName string, prior nodestate.Prior) error {
	_, err := nodeconditions.Patch(ctx, r.Client, r.APIReader, r.Recent, nodeName, func(n *corev1.Node) []nodestate.ConditionEdit {
		return nodestate.RestoreConditions(n.Status.Conditions, prior)
	})
	return err
}
