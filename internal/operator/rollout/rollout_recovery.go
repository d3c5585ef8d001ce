package rollout

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	rolloutvalidation "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
)

// recoveryRetry is how often a Recovering row reads its workloads again.
// The rollout watches no Deployment, ReplicaSet or StatefulSet (a watch of
// every one of the cluster for the few a restored node waits for would
// cost more than a get of those few every few seconds).
const recoveryRetry = 5 * time.Second

// recoveryGate is spec.recoveryGate, Workloads when unset.
func recoveryGate(ro *nmv1alpha1.NodeMaintenanceRollout) nmv1alpha1.RecoveryGate {
	return rolloutvalidation.RecoveryGateOrDefault(ro.Spec.RecoveryGate)
}

// recovering moves a Recovering row on: to Soaking (RecoveredAt) once the
// node is Ready and, under recoveryGate Workloads, every workload evicted
// from it is fully available again; to Failed once recoveryTimeout has
// passed since RestoredAt. It returns when to look again.
func recovering(row *nmv1alpha1.RolloutNode, o observed, ro *nmv1alpha1.NodeMaintenanceRollout, now time.Time) time.Duration {
	if o.node == nil {
		fail(row, fmt.Sprintf("node %s was deleted while its workloads recovered", row.Name), now)
		return 0
	}
	var waiting []string
	if recoveryGate(ro) == nmv1alpha1.RecoveryWorkloads {
		waiting = o.unrecovered
	}
	ready := validation.NodeReady(o.node)
	if ready && len(waiting) == 0 {
		row.State, row.RecoveredAt, row.WaitingForWorkloads, row.Reason = nmv1alpha1.NodeSoaking, stamp(now), nil, ""
		return until(row.RestoredAt, ro.Spec.SoakFor, now)
	}
	row.WaitingForWorkloads = waiting
	if !ready {
		waiting = append([]string{fmt.Sprintf("node %s is not Ready", row.Name)}, waiting...)
	}
	timeout := rolloutvalidation.RecoveryTimeoutOrDefault(&ro.Spec)
	left := until(row.RestoredAt, &metav1.Duration{Duration: timeout}, now)
	if left == 0 {
		fail(row, fmt.Sprintf("workloads not recovered within recoveryTimeout %s: %s", timeout, strings.Join(waiting, "; ")), now)
		return 0
	}
	row.Reason = fmt.Sprintf("restored; its slot is held until the workloads evicted from it are fully available again (at most recoveryTimeout %s)", timeout)
	return min(left, recoveryRetry)
}

// availability says whether a workload is fully available, as its
// controller reports it in its status, and how available it is.
// Deployment: as many available and updated replicas as spec.replicas;
// ReplicaSet: as many available; StatefulSet: as many available and
// ready; each once its controller has seen its latest spec.
func availability(obj client.Object) (bool, string) {
	var want, available, other int32
	var observed int64
	otherName := ""
	switch w := obj.(type) {
	case *appsv1.Deployment:
		want, available, observed = replicas(w.Spec.Replicas), w.Status.AvailableReplicas, w.Status.ObservedGeneration
		other, otherName = w.Status.UpdatedReplicas, "updated"
	case *appsv1.ReplicaSet:
		want, available, observed = replicas(w.Spec.Replicas), w.Status.AvailableReplicas, w.Status.ObservedGeneration
		other = want
	case *appsv1.StatefulSet:
		want, available, observed = replicas(w.Spec.Replicas), w.Status.AvailableReplicas, w.Status.ObservedGeneration
		other, otherName = w.Status.ReadyReplicas, "ready"
	default:
		return true, ""
	}
	how := fmt.Sprintf("%d of %d available", available, want)
	switch {
	case observed < obj.GetGeneration():
		return false, how + fmt.Sprintf(", its controller has not seen generation %d yet", obj.GetGeneration())
	case available < want:
		return false, how
	case other < want:
		return false, how + fmt.Sprintf(", %d %s", other, otherName)
	}
	return true, how
}

// replicas is spec.replicas, whose default is 1.
func replicas(n *int32) int32 {
	if n == nil {
		return 1
	}
	return *n
}

// recoveryBlockers are the lines of status.blockers for the Recovering rows
// when the next node waits for a slot: each names the workloads that hold
// its slot.
func recoveryBlockers(s *scope) []string {
	if s.problem != "" || s.ro.Spec.Paused || haltReason(s.ro, s.status.Nodes) != "" || s.maxUnavailable == 0 || !waitsForSlot(s.status.Nodes) || countOutOfService(s.status.Nodes, s.obs) < s.maxUnavailable {
		return nil
	}
	var b []string
	for _, row := range s.status.Nodes {
		if row.State == nmv1alpha1.NodeRecovering && len(row.WaitingForWorkloads) > 0 {
			b = append(b, fmt.Sprintf("node %s holds its slot until its workloads are fully available again: %s", row.Name, strings.Join(row.WaitingForWorkloads, "; ")))
		}
	}
	return b
}

// waitsForSlot reports a Waiting row that waits for nobody's
// NodeMaintenance: it waits for a slot (or a gate, a pause, a halt).
func waitsForSlot(rows []nmv1alpha1.RolloutNode) bool {
	for _, row := range rows {
		if row.State == nmv1alpha1.NodeWaiting && row.WaitingFor == "" {
			return true
		}
	}
	return false
}
