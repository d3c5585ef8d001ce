package controller

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/notify"
)

// The maintenance events go to every destination of the operator's
// --notify-url, for every NodeMaintenance, each sent once the write that
// decides it succeeded: started with the prior-state record (the pass that
// cordons the node), failed and succeeded with the status write that sets
// the phase, blocked once the status of a drain round is written, and
// restored with the removal of the finalizer.

// notifyPhase sends failed or succeeded when the status write that just
// replaced a status of phase before set one of them.
func (r *NodeMaintenanceReconciler) notifyPhase(before nmv1beta1.MaintenancePhase, nm *nmv1beta1.NodeMaintenance) {
	if before == nm.Status.Phase {
		return
	}
	switch nm.Status.Phase {
	case nmv1beta1.MaintenanceFailed:
		r.notifyMaintenance(nm, notify.MaintenanceFailed, nil)
	case nmv1beta1.MaintenanceSucceeded:
		r.notifyMaintenance(nm, notify.MaintenanceSucceeded, nil)
	}
}

// notifyBlockers sends blocked when the round's blockers (drain.Round's
// Blockers: budgets, failure causes, kept pods) differ from those last sent
// for this maintenance: a drain held by one budget for many rounds sends
// one event, and another when something else holds it.
func (r *NodeMaintenanceReconciler) notifyBlockers(s *scope) {
	blockers := s.round.Blockers()
	if len(blockers) == 0 || slices.Equal(blockers, s.progress.notifiedBlockers) {
		return
	}
	s.progress.notifiedBlockers = blockers
	r.notifyMaintenance(s.nm, notify.MaintenanceBlocked, blockers)
}

// notifyMaintenance queues an event of nm, as just written, for every
// destination of --notify-url.
func (r *NodeMaintenanceReconciler) notifyMaintenance(nm *nmv1beta1.NodeMaintenance, eventType string, blockers []string) {
	if r.Notify == nil || len(r.NotifyTo) == 0 {
		return
	}
	st := &nm.Status
	data := notify.MaintenanceData{Maintenance: nm.Name, Node: nm.Spec.NodeName, Phase: st.Phase, Blockers: blockers,
		TotalPods: st.TotalPods, EvictionPods: st.EvictionPods, PendingPods: len(st.PendingPodsRefs), DrainProgress: st.DrainProgress}
	if data.Phase == "" {
		data.Phase = nmv1beta1.MaintenanceRunning // started, before the first status write
	}
	if eventType == notify.MaintenanceFailed || eventType == notify.MaintenanceBlocked {
		data.Reason = st.LastError
	}
	ev := notify.Event{Type: eventType, Source: notify.MaintenanceSource(nm.Name), Subject: nm.Spec.NodeName,
		ID: notify.EventID(string(nm.UID), nm.ResourceVersion, eventType, blockersHash(blockers)), Time: r.now(), Data: data}
	for _, d := range r.NotifyTo {
		r.Notify.Send(d, string(nm.UID), ev)
	}
}

// blockersHash tells apart two blocked events of one resourceVersion (a
// round whose status write was held back by writeProgress).
func blockersHash(blockers []string) string {
	if len(blockers) == 0 {
		return ""
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(strings.Join(blockers, "\n")))
	return fmt.Sprintf("%08x", h.Sum32())
}
