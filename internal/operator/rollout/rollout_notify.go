package rollout

import (
	"slices"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/notify"
)

// transition is one event a status write decided.
type transition struct {
	event nmv1alpha1.NotificationEvent
	// row is the node's row, for the node events.
	row *nmv1alpha1.RolloutNode
}

// transitions are the events of the write of after over before, in the
// order they are sent: the rollout started, then each node's restore and
// end in row order, then what blocks the next node, then the rollout's end.
func transitions(before, after *nmv1alpha1.NodeMaintenanceRolloutStatus) []transition {
	var out []transition
	if !anyStarted(before.Nodes) && anyStarted(after.Nodes) {
		out = append(out, transition{event: nmv1alpha1.EventStarted})
	}
	was := map[string]nmv1alpha1.RolloutNode{}
	for _, row := range before.Nodes {
		was[row.Name] = row
	}
	for i := range after.Nodes {
		row, old := &after.Nodes[i], was[after.Nodes[i].Name]
		if row.RestoredAt != nil && old.RestoredAt == nil {
			out = append(out, transition{event: nmv1alpha1.EventRestored, row: row})
		}
		switch {
		case row.State == old.State:
		case row.State == nmv1alpha1.NodeDone:
			out = append(out, transition{event: nmv1alpha1.EventNodeDone, row: row})
		case row.State == nmv1alpha1.NodeFailed:
			out = append(out, transition{event: nmv1alpha1.EventNodeFailed, row: row})
		}
	}
	if len(after.Blockers) > 0 && !slices.Equal(before.Blockers, after.Blockers) {
		out = append(out, transition{event: nmv1alpha1.EventBlocked})
	}
	if after.Phase != before.Phase {
		switch after.Phase {
		case nmv1alpha1.RolloutHalted:
			out = append(out, transition{event: nmv1alpha1.EventHalted})
		case nmv1alpha1.RolloutSucceeded:
			out = append(out, transition{event: nmv1alpha1.EventSucceeded})
		}
	}
	return out
}

// anyStarted reports whether a node of the set has left Waiting.
func anyStarted(rows []nmv1alpha1.RolloutNode) bool {
	return slices.ContainsFunc(rows, func(row nmv1alpha1.RolloutNode) bool { return row.State != nmv1alpha1.NodeWaiting })
}

// notifyWritten sends spec.notify the events of the status write that just
// replaced before with s.ro.Status: after the write, so that a pass that
// loses its write to a conflict sends nothing and the pass that wins sends
// each transition once. Sending only queues (package notify).
func (r *RolloutReconciler) notifyWritten(s *scope, before *nmv1alpha1.NodeMaintenanceRolloutStatus) {
	if r.Notify == nil || len(s.ro.Spec.Notify) == 0 {
		return
	}
	ts := transitions(before, &s.ro.Status)
	for _, n := range s.ro.Spec.Notify {
		dest := notify.Destination{URL: n.URL}
		if n.SecretRef != nil {
			dest.Token = notify.SecretToken(r.Secrets, r.Namespace, n.SecretRef.Name, n.SecretRef.Key)
		}
		for _, t := range ts {
			if len(n.Events) == 0 || slices.Contains(n.Events, t.event) {
				r.Notify.Send(dest, string(s.ro.UID), rolloutEvent(s, t))
			}
		}
	}
}

// rolloutEvent is the notification of t, written by s.
func rolloutEvent(s *scope, t transition) notify.Event {
	st, typ := &s.ro.Status, notify.RolloutTypes[t.event]
	data := notify.RolloutData{Rollout: s.ro.Name, Event: t.event, Phase: st.Phase, Message: st.Message, Blockers: st.Blockers,
		Total: st.Total, InProgress: st.InProgress, Done: st.Done, Failed: st.Failed}
	node := ""
	if t.row != nil {
		node, data.Node, data.Reason = t.row.Name, t.row.Name, t.row.Reason
	}
	return notify.Event{Type: typ, Source: notify.RolloutSource(s.ro.Name), Subject: node,
		ID: notify.EventID(string(s.ro.UID), s.ro.ResourceVersion, typ, node), Time: s.now, Data: data}
}

// The Secrets of spec.notify[].secretRef are read from the cache, which
// holds those of the operator's namespace only.
//
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get;list;watch
