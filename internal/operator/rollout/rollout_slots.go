package rollout

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	rolloutvalidation "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
)

// foreignRetry is how often a rollout looks again whether someone else's
// NodeMaintenance of one of its nodes is gone.
const foreignRetry = 5 * time.Second

// maxUnavailable is spec.maxUnavailable resolved against a set of total
// nodes, by the rule the webhook admits it with
// (rolloutvalidation.MaxUnavailableNodes: default 1; a count, or a
// percentage rounded down, at least 1).
func maxUnavailable(ro *nmv1alpha1.NodeMaintenanceRollout, total int) (int, error) {
	n, err := rolloutvalidation.MaxUnavailableNodes(ro.Spec.MaxUnavailable, total)
	if err != nil {
		return 0, fmt.Errorf("%v: fix it to a count or a percentage", err)
	}
	return n, nil
}

// holdsSlot reports whether a row's state takes its node out of service.
func holdsSlot(state nmv1alpha1.RolloutNodeState) bool {
	switch state {
	case nmv1alpha1.NodeDraining, nmv1alpha1.NodeStepRunning, nmv1alpha1.NodeHolding, nmv1alpha1.NodeRestoring,
		nmv1alpha1.NodeRecovering, nmv1alpha1.NodeSoaking:
		return true
	}
	return false
}

// outOfService reports whether a node of the set is out of service: its
// row holds a slot, or a NodeMaintenance holds it (ours, failed and left
// in place, or someone else's), or it is unschedulable or NotReady. A node
// that no longer exists serves nothing and holds nothing.
func outOfService(row nmv1alpha1.RolloutNode, o observed) bool {
	if holdsSlot(row.State) || o.child != nil || o.foreign != "" {
		return true
	}
	return o.node != nil && (o.node.Spec.Unschedulable || !validation.NodeReady(o.node))
}

// countOutOfService counts the nodes of the set out of service.
func countOutOfService(rows []nmv1alpha1.RolloutNode, obs map[string]observed) int {
	n := 0
	for _, row := range rows {
		if outOfService(row, obs[row.Name]) {
			n++
		}
	}
	return n
}

// startNodes starts the Waiting rows, in order, while fewer than
// maxUnavailable nodes of the set are out of service, unless the rollout is
// paused or halted. On the way it adopts a row whose child exists already
// (a pass that crashed after creating it), notes whom a node held by
// someone else waits for, and fails a row whose node was deleted.
func (r *RolloutReconciler) startNodes(_ context.Context, s *scope) (ctrl.Result, error) {
	if s.problem != "" {
		return ctrl.Result{}, nil
	}
	n, err := maxUnavailable(s.ro, len(s.status.Nodes))
	if err != nil {
		s.problem = err.Error()
		return ctrl.Result{}, nil
	}
	s.maxUnavailable = n
	blocked := s.ro.Spec.Paused || haltReason(s.ro, s.status.Nodes) != "" || s.gate.closed
	start(s.status.Nodes, s.obs, n, blocked, s.now, func(node string) string { return childName(s.ro.Name, node) })
	for _, row := range s.status.Nodes {
		if row.WaitingFor != "" {
			// A maintenance that ends without touching its node (one that
			// failed before the cordon) changes no node: look again.
			s.requeueAfter(foreignRetry)
		}
	}
	return ctrl.Result{}, nil
}

// start is startNodes' decision, pure: it changes the Waiting rows.
func start(rows []nmv1alpha1.RolloutNode, obs map[string]observed, limit int, blocked bool, now time.Time, child func(string) string) {
	out := countOutOfService(rows, obs)
	for i := range rows {
		row, o := &rows[i], obs[rows[i].Name]
		if row.State != nmv1alpha1.NodeWaiting {
			continue
		}
		switch {
		case o.child != nil:
			row.WaitingFor = ""
			begin(row, child(row.Name), now)
		case o.node == nil:
			fail(row, fmt.Sprintf("node %s no longer exists; it was not maintained", row.Name), now)
		case o.foreign != "":
			row.WaitingFor = o.foreign
		case blocked || (out >= limit && !outOfService(*row, o)):
			// A node out of service already (cordoned by hand, NotReady)
			// is maintained even when the slots are taken: that takes
			// nothing more out of service.
			row.WaitingFor = ""
		default:
			row.WaitingFor = ""
			if !outOfService(*row, o) {
				out++
			}
			begin(row, child(row.Name), now)
		}
	}
}
