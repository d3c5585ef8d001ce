package rollout

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
)

// observe reads what the cluster says about each node of the set: the
// node, the NodeMaintenances of the node (ours, or someone else's), the
// step Job, and for a restored node the workloads it waits for.
func (r *RolloutReconciler) observe(ctx context.Context, s *scope) (ctrl.Result, error) {
	nms := &nmv1beta1.NodeMaintenanceList{}
	if err := r.Client.List(ctx, nms); err != nil {
		return ctrl.Result{}, fmt.Errorf("list NodeMaintenances for rollout %s: %w", s.ro.Name, err)
	}
	jobs := &batchv1.JobList{}
	if err := r.Client.List(ctx, jobs, client.MatchingLabels{nmv1alpha1.RolloutLabel: s.ro.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list the step Jobs of rollout %s: %w", s.ro.Name, err)
	}
	s.obs = make(map[string]observed, len(s.status.Nodes))
	for _, row := range s.status.Nodes {
		node := &corev1.Node{}
		err := r.Client.Get(ctx, client.ObjectKey{Name: row.Name}, node)
		if err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get node %s of rollout %s: %w", row.Name, s.ro.Name, err)
		}
		o := observed{}
		if err == nil {
			o.node = node
		}
		s.obs[row.Name] = o
	}
	for i := range nms.Items {
		s.observeMaintenance(&nms.Items[i])
	}
	for i := range jobs.Items {
		s.observeJob(&jobs.Items[i])
	}
	r.readRecovery(ctx, s)
	return ctrl.Result{}, nil
}

func (s *scope) observeMaintenance(nm *nmv1beta1.NodeMaintenance) {
	o, ok := s.obs[nm.Spec.NodeName]
	if !ok {
		return
	}
	if ownedBy(nm, s.ro) && nm.Name == childName(s.ro.Name, nm.Spec.NodeName) {
		o.child = nm
	} else if o.foreign == "" || nm.Name < o.foreign {
		o.foreign = nm.Name
	}
	s.obs[nm.Spec.NodeName] = o
}

func (s *scope) observeJob(job *batchv1.Job) {
	node := job.Labels[nmv1alpha1.RolloutNodeLabel]
	o, ok := s.obs[node]
	if !ok || !ownedBy(job, s.ro) || job.Name != jobName(s.ro.Name, node) {
		return
	}
	o.job = job
	s.obs[node] = o
}

// ownedBy reports whether ro is obj's controller.
func ownedBy(obj metav1.Object, ro *nmv1alpha1.NodeMaintenanceRollout) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == ro.UID
}

// advanceRows moves each started row as far as what was observed allows.
func (r *RolloutReconciler) advanceRows(_ context.Context, s *scope) (ctrl.Result, error) {
	for i := range s.status.Nodes {
		if wait := advance(&s.status.Nodes[i], s.obs[s.status.Nodes[i].Name], s.ro, s.now); wait > 0 {
			s.requeueAfter(wait)
		}
	}
	return ctrl.Result{}, nil
}

// advance is one row's state machine, pure: it moves the row as far as
// what was observed and the clock allow, and returns how long until a
// timer (hold, step timeout, recovery, soak) may move it on, or 0.
//
// A state that waits for nothing but its timer (Holding, Soaking) is passed
// through in the same pass when the timer is zero: a drained node with no
// hold is Restoring at once, a recovered node with no soak left is Done at
// once (and its slot goes to the next node in the same pass). Every other
// state a row enters ends the pass's moves for it, as before: Restoring is
// decided on in the next pass, once act has deleted the child. So the
// status written still comes before the action it decides (act runs after
// the write), and a crash between the two leaves a status whose action the
// next pass does again.
func advance(row *nmv1alpha1.RolloutNode, o observed, ro *nmv1alpha1.NodeMaintenanceRollout, now time.Time) time.Duration {
	for {
		from := row.State
		wait := advanceOnce(row, o, ro, now)
		if wait > 0 || row.State == from || !timerOnly(row.State) {
			return wait
		}
	}
}

// timerOnly reports a state that waits for nothing but a timer.
func timerOnly(state nmv1alpha1.RolloutNodeState) bool {
	return state == nmv1alpha1.NodeHolding || state == nmv1alpha1.NodeSoaking
}

// advanceOnce is one transition of a row's state machine.
func advanceOnce(row *nmv1alpha1.RolloutNode, o observed, ro *nmv1alpha1.NodeMaintenanceRollout, now time.Time) time.Duration {
	spec := &ro.Spec
	switch row.State {
	case nmv1alpha1.NodeDraining:
		return drained(row, o, ro, now)
	case nmv1alpha1.NodeStepRunning:
		return stepRan(row, o, spec, now)
	case nmv1alpha1.NodeHolding:
		if left := until(row.DrainedAt, spec.HoldFor, now); left > 0 {
			return left
		}
		row.StepFinishedAt = stamp(now)
		row.State = nmv1alpha1.NodeRestoring
	case nmv1alpha1.NodeRestoring:
		if restored(row, o, now) {
			return recovering(row, o, ro, now)
		}
	case nmv1alpha1.NodeRecovering:
		return recovering(row, o, ro, now)
	case nmv1alpha1.NodeSoaking:
		if left := until(row.RestoredAt, spec.SoakFor, now); left > 0 {
			return left
		}
		row.State, row.FinishedAt, row.Reason = nmv1alpha1.NodeDone, stamp(now), ""
	}
	return 0
}

// drained moves a Draining row on once its child says how the drain ended.
func drained(row *nmv1alpha1.RolloutNode, o observed, ro *nmv1alpha1.NodeMaintenanceRollout, now time.Time) time.Duration {
	spec := &ro.Spec
	if o.child == nil {
		return 0 // being created (act)
	}
	switch o.child.Status.Phase {
	case nmv1beta1.MaintenanceFailed:
		fail(row, fmt.Sprintf("NodeMaintenance %s failed: %s", o.child.Name, o.child.Status.LastError), now)
	case nmv1beta1.MaintenanceSucceeded:
		row.DrainedAt = stamp(now)
		if spec.Step != nil {
			row.State, row.Job = nmv1alpha1.NodeStepRunning, jobName(ro.Name, row.Name)
			return 0
		}
		row.State = nmv1alpha1.NodeHolding
		return until(row.DrainedAt, spec.HoldFor, now)
	}
	return 0
}

// restored moves a Restoring row to Recovering, and reports it, once its
// child is gone (its finalizer let it go only once the node was restored
// as it was before: schedulable, or cordoned if someone had cordoned it
// before) and the node is Ready.
func restored(row *nmv1alpha1.RolloutNode, o observed, now time.Time) bool {
	if o.node == nil {
		fail(row, fmt.Sprintf("node %s was deleted while it was restored", row.Name), now)
		return false
	}
	if o.child != nil {
		return false
	}
	if !validation.NodeReady(o.node) {
		row.Reason = fmt.Sprintf("node %s is restored but not Ready: its slot is held, and its recovery and soak start, once it is Ready", row.Name)
		return false
	}
	row.RestoredAt, row.Reason = stamp(now), ""
	row.State = nmv1alpha1.NodeRecovering
	return true
}

// begin starts a row: its child is created once this is written (act).
func begin(row *nmv1alpha1.RolloutNode, child string, now time.Time) {
	row.State, row.Maintenance, row.StartedAt, row.Reason = nmv1alpha1.NodeDraining, child, stamp(now), ""
}

// fail ends a row as Failed, saying why.
func fail(row *nmv1alpha1.RolloutNode, reason string, now time.Time) {
	row.State, row.Reason, row.FinishedAt = nmv1alpha1.NodeFailed, reason, stamp(now)
}

// until is how long from now until since+d, 0 when that has passed. A
// stamp is to the second (as the API stores it), so the event may have
// happened up to a second after it: the second is added, so that d is
// never cut short.
func until(since *metav1.Time, d *metav1.Duration, now time.Time) time.Duration {
	if since == nil || d == nil || d.Duration <= 0 {
		return 0
	}
	return max(since.Add(d.Duration+time.Second).Sub(now), 0)
}

// stamp is now as the API stores it, to the second, so that a status
// written and read back is the status computed.
func stamp(now time.Time) *metav1.Time { t := metav1.NewTime(now.Truncate(time.Second)); return &t }
