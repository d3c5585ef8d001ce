package controller

import (
	"context"
	"math/bits"
	"reflect"
	"sort"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
)

// setRound writes what a drain round left into status. A round that left
// nothing to evict ends the drain: Succeeded.
func setRound(status *nmv1beta1.NodeMaintenanceStatus, round drain.Round) {
	setPending(status, round.Pending)
	status.DrainProgress = drainProgress(status.EvictionPods, len(round.Pending))
	status.LastError = round.Message()
	status.ErrorOnLeaseCount = 0
	if round.Done() {
		status.Phase = nmv1beta1.MaintenanceSucceeded
		status.DrainProgress = 100
		status.LastError = ""
	}
}

// fail ends the maintenance as Failed with msg as its lastError, and the pass
// with it.
func (r *NodeMaintenanceReconciler) fail(ctx context.Context, s *scope, msg string) (ctrl.Result, error) {
	return r.failWith(ctx, s, nmv1beta1.ReasonFailed, msg)
}

// failWith is fail with the reason of the Drained condition. The status is
// written at the end of the pass, and the event follows it.
func (r *NodeMaintenanceReconciler) failWith(ctx context.Context, s *scope, reason, msg string) (ctrl.Result, error) {
	s.status.Phase = nmv1beta1.MaintenanceFailed
	s.status.LastError = msg
	setCondition(s, nmv1beta1.ConditionDrained, false, reason, boundedError(msg), r.now())
	s.writeAtEnd()
	s.onWritten(func() {
		r.Recorder.Eventf(s.nm, nil, corev1.EventTypeWarning, ReasonFailedMaintenance, "Maintain", "%s", msg)
		log.FromContext(ctx).Info("maintenance failed", "node", s.nm.Spec.NodeName, "reason", msg)
	})
	s.end()
	return ctrl.Result{}, nil
}

// writeStatus writes status when it changed, stamping lastUpdate.
func (r *NodeMaintenanceReconciler) writeStatus(ctx context.Context, nm *nmv1beta1.NodeMaintenance, status *nmv1beta1.NodeMaintenanceStatus) error {
	status.LastUpdate = nm.Status.LastUpdate
	status.LastError = boundedError(status.LastError)
	if equalStatus(&nm.Status, status) {
		return nil
	}
	status.LastUpdate = metav1.NewTime(r.now())
	before := nm.Status.Phase
	nm.Status = *status
	replaced := nm.ResourceVersion
	if err := r.Client.Status().Update(ctx, nm); err != nil {
		return err
	}
	r.wrote(replaced, nm)
	r.notifyPhase(before, nm)
	return nil
}

// writeProgress writes s.status as writeStatus does, except a change of the
// counts alone (onlyCounts) within interval of the last write it made: it
// writes nothing then, and returns how long is left.
func (r *NodeMaintenanceReconciler) writeProgress(ctx context.Context, s *scope, interval time.Duration) (time.Duration, error) {
	if onlyCounts(&s.nm.Status, s.status) {
		if wait := interval - r.now().Sub(s.progress.lastProgressWrite); wait > 0 {
			return wait, nil
		}
	}
	before := s.nm.ResourceVersion
	if err := r.writeStatus(ctx, s.nm, s.status); err != nil {
		return 0, err
	}
	if s.nm.ResourceVersion != before {
		s.progress.lastProgressWrite = r.now()
	}
	return 0, nil
}

// statusInterval is how often at most the status of a drain in progress is
// written when only its counts changed (onlyCounts): pods that left, the
// pending list and the messages that count them. A change of phase, of a
// condition's status or reason, or of lastError is written at once, and so
// is the end of the drain.
const statusInterval = time.Second

// onlyCounts reports whether next differs from stored in the drain's counts
// alone: same phase and lastError, and the same conditions with the same
// status and reason (their messages may count pods).
func onlyCounts(stored, next *nmv1beta1.NodeMaintenanceStatus) bool {
	if stored.Phase != next.Phase || stored.LastError != next.LastError || len(stored.Conditions) != len(next.Conditions) {
		return false
	}
	for _, c := range next.Conditions {
		old := meta.FindStatusCondition(stored.Conditions, c.Type)
		if old == nil || old.Status != c.Status || old.Reason != c.Reason {
			return false
		}
	}
	return true
}

// drainProgress is the percentage of the pods to evict that are gone,
// clamped to 0..100 (pods can arrive after the count was taken).
func drainProgress(evictionPods, pending int) int {
	if evictionPods <= 0 {
		if pending == 0 {
			return 100
		}
		return 0
	}
	switch {
	case pending <= 0:
		return 100
	case pending >= evictionPods:
		return 0
	}
	// evictionPods comes back from the stored status and can be any int:
	// (evictionPods-pending)*100 would overflow, so multiply in 128 bits.
	// The quotient is below 100, as evictionPods-pending < evictionPods.
	hi, lo := bits.Mul64(uint64(evictionPods-pending), 100)
	p, _ := bits.Div64(hi, lo, uint64(evictionPods))
	return int(p)
}

// setPending writes the pending pods into status, sorted by namespace and
// name so that the status does not flap between passes.
func setPending(status *nmv1beta1.NodeMaintenanceStatus, pods []corev1.Pod) {
	refs := make([]nmv1beta1.PodReference, 0, len(pods))
	for _, p := range pods {
		refs = append(refs, nmv1beta1.PodReference{Namespace: p.Namespace, Name: p.Name})
	}
	sortRefs(refs)
	names := make([]string, 0, len(refs))
	for _, r := range refs {
		names = append(names, r.Name)
	}
	status.PendingPods, status.PendingPodsRefs = nil, nil
	if len(refs) > 0 {
		status.PendingPods, status.PendingPodsRefs = names, refs
	}
}

func sortRefs(refs []nmv1beta1.PodReference) {
	sort.Slice(refs, func(i, j int) bool {
		if refs[i].Namespace != refs[j].Namespace {
			return refs[i].Namespace < refs[j].Namespace
		}
		return refs[i].Name < refs[j].Name
	})
}

// maxLastErrorBytes bounds lastError in bytes: three eviction refusals from
// the API server fit many times over, and a message that does not (a long
// webhook or admission answer) cannot make the status large.
const maxLastErrorBytes = 4096

// boundedError cuts msg to maxLastErrorBytes, on a UTF-8 boundary, and says
// that it did.
func boundedError(msg string) string {
	if len(msg) <= maxLastErrorBytes {
		return msg
	}
	const cut = " ... (truncated)"
	end := maxLastErrorBytes - len(cut)
	for end > 0 && !utf8.RuneStart(msg[end]) {
		end--
	}
	return msg[:end] + cut
}

func equalStatus(a, b *nmv1beta1.NodeMaintenanceStatus) bool {
	return reflect.DeepEqual(a, b)
}
