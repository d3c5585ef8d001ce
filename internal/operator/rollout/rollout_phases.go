package rollout

import (
	"context"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// A phase of a pass. It lets the pass go on with a zero result and no
// error, and ends it with an error, a result, or scope.end. Timers (hold,
// soak, step timeout) are asked for with scope.requeueAfter and do not end
// the pass.
type phase func(ctx context.Context, s *scope) (ctrl.Result, error)

// observed is what the cluster says about one node of the set.
type observed struct {
	// node is nil when the node does not exist.
	node *corev1.Node
	// child is this rollout's NodeMaintenance of the node, if any.
	child *nmv1beta1.NodeMaintenance
	// foreign names a NodeMaintenance of the node this rollout does not own.
	foreign string
	// job is the node's step Job, if any.
	job *batchv1.Job
	// unrecovered are the row's workloads not fully available, each with
	// its availability (Deployment a/web: 1 of 3 available), read for a
	// restored row under recoveryGate Workloads (readRecovery).
	unrecovered []string
}

// scope is what one pass works on.
type scope struct {
	ro *nmv1alpha1.NodeMaintenanceRollout
	// status is the status the pass writes, a copy of ro's; old is ro's
	// status as read, for the events of what changed.
	status *nmv1alpha1.NodeMaintenanceRolloutStatus
	old    *nmv1alpha1.NodeMaintenanceRolloutStatus
	now    time.Time
	// obs is what the cluster says about each node of the set.
	obs map[string]observed
	// maxUnavailable is spec.maxUnavailable resolved against the set.
	maxUnavailable int
	// problem, when set, halts the rollout: a node set that cannot be
	// resolved, a maxUnavailable that cannot be.
	problem string
	// failures are rows that an action of this pass failed (a create the
	// API server refused), written by act in a second write.
	failures map[string]string
	// mu guards failures while act's actions run at once (forEach).
	mu sync.Mutex
	// gate is the first closed gate of the pass (checkGates), or the zero
	// value while every gate is open.
	gate gateState

	requeue time.Duration
	ended   bool
}

func (s *scope) end() { s.ended = true }

// requeueAfter asks for a pass again after d at the latest.
func (s *scope) requeueAfter(d time.Duration) {
	if d <= 0 {
		d = time.Millisecond
	}
	if s.requeue == 0 || d < s.requeue {
		s.requeue = d
	}
}

// runPhases runs phases in order until one ends the pass; the timers asked
// for along the way make the requeue of a pass that ran to its end.
func runPhases(ctx context.Context, s *scope, phases []phase) (ctrl.Result, error) {
	for _, p := range phases {
		if res, err := p(ctx, s); err != nil || !res.IsZero() || s.ended {
			return res, err
		}
	}
	return ctrl.Result{RequeueAfter: s.requeue}, nil
}
