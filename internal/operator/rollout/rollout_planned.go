package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/nodeconditions"
)

// The node lifecycle condition MaintenancePlanned (KEP-5683) on the nodes a
// rollout will maintain: True on every Waiting node while the rollout may
// still start it (Progressing or Paused), with reason MaintenanceWindow when
// the rollout has spec.window and AdminRequested otherwise. When a row
// leaves Waiting (Draining: its child NodeMaintenance is created), the
// condition is handed to the child: the child takes it off in the same
// patch that first writes its own MaintenanceInProgress (the NodeMaintenance
// controller's markNode), so the node says planned until it says in
// progress, never both and never neither, and the handover costs no write
// of its own. A child that waits (in the operator's queue, for a lease
// another holder has) leaves the node planned, which it still is. The
// rollout removes it from the node of every row past Draining (a child
// that failed before it wrote anything, a node restored), and from every
// node when the rollout halts, succeeds or is deleted. Each pass computes
// it from the status it wrote, so a pass that runs twice or crashed halfway
// writes the same. A MaintenancePlanned this rollout did not write (no
// nodestate.PlannedBy with this rollout's name) is never changed.
//
// +kubebuilder:rbac:groups="",resources=nodes/status,verbs=patch

// planned is MaintenancePlanned as rollout ro writes it on a node of wave.
func planned(ro *nmv1alpha1.NodeMaintenanceRollout, wave int32) corev1.NodeCondition {
	reason := nodestate.ReasonAdminRequested
	if ro.Spec.Window != nil {
		reason = nodestate.ReasonMaintenanceWindow
	}
	return corev1.NodeCondition{Type: corev1.NodeMaintenancePlanned, Status: corev1.ConditionTrue, Reason: reason,
		Message: nodestate.PlannedBy(ro.Name) + fmt.Sprintf("will maintain the node (wave %d)", wave)}
}

// markPlanned brings MaintenancePlanned on every node of the set to what
// the status written says, the nodes at once (forEach). A Draining row's
// is its child's to take off, while the rollout may still go on.
func (r *RolloutReconciler) markPlanned(ctx context.Context, s *scope) (ctrl.Result, error) {
	may := s.status.Phase == nmv1alpha1.RolloutProgressing || s.status.Phase == nmv1alpha1.RolloutPaused
	rows := s.status.Nodes
	err := forEach(len(rows), func(i int) error {
		if o := s.obs[rows[i].Name]; o.node == nil || (may && rows[i].State == nmv1alpha1.NodeDraining) {
			return nil
		}
		return r.setPlanned(ctx, s.ro, rows[i], may && rows[i].State == nmv1alpha1.NodeWaiting)
	})
	return ctrl.Result{}, err
}

// unmarkPlanned removes this rollout's MaintenancePlanned from every node of
// its set: the deleted rollout plans nothing any more.
func (r *RolloutReconciler) unmarkPlanned(ctx context.Context, s *scope) error {
	var errs []error
	for _, row := range s.ro.Status.Nodes {
		if err := r.setPlanned(ctx, s.ro, row, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// setPlanned writes (on) or removes this rollout's MaintenancePlanned on the
// node of row. A node that is gone has nothing to change.
func (r *RolloutReconciler) setPlanned(ctx context.Context, ro *nmv1alpha1.NodeMaintenanceRollout, row nmv1alpha1.RolloutNode, on bool) error {
	ours := func(c corev1.NodeCondition) bool { return strings.HasPrefix(c.Message, nodestate.PlannedBy(ro.Name)) }
	types := []corev1.NodeConditionType{corev1.NodeMaintenancePlanned}
	_, err := nodeconditions.Patch(ctx, r.Client, r.APIReader, r.Recent, row.Name, func(n *corev1.Node) []nodestate.ConditionEdit {
		if on {
			return nodestate.SetConditions(n.Status.Conditions, []corev1.NodeCondition{planned(ro, row.Wave)}, ours, r.now())
		}
		return nodestate.RemoveConditions(n.Status.Conditions, types, ours)
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("rollout %s: %w", ro.Name, err)
	}
	return nil
}
