package rollout

import (
	"context"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

// gateRetry is how often a closed gate is looked at again when it does not
// say when it opens (an alert that fires, a Prometheus that cannot be
// reached).
const gateRetry = 15 * time.Second

// gateState is what one gate says about starting a node now.
type gateState struct {
	// closed holds every Waiting node.
	closed bool
	// reason is the Gated condition's reason while closed (OutsideWindow,
	// AlertFiring, PrometheusUnreachable).
	reason string
	// message says why, in a sentence naming the gate.
	message string
	// retry is when to look again, 0 for gateRetry.
	retry time.Duration
	// nextOpen is when a window opens next, for status.nextWindowStart.
	nextOpen *time.Time
}

// gate is one check that must pass before a node starts. It is asked only
// when a node would start otherwise.
type gate func(ctx context.Context, s *scope) gateState

// gates are the rollout's gates, in the order they are asked: the first
// closed one holds the nodes, and the ones after it are not asked (no
// query to Prometheus outside the window).
func (r *RolloutReconciler) gates() []gate {
	return []gate{windowGate, prometheusGate}
}

// checkGates asks the gates when a node could start now (a Waiting row, the
// rollout neither paused nor halted), and records the first closed one in
// the scope: startNodes then starts nothing, and summarize sets the Gated
// condition and status.nextWindowStart. Nodes in progress go on.
func (r *RolloutReconciler) checkGates(ctx context.Context, s *scope) (ctrl.Result, error) {
	s.gate = gateState{}
	if s.problem != "" || s.ro.Spec.Paused || haltReason(s.ro, s.status.Nodes) != "" || !anyWaiting(s.status.Nodes) {
		return ctrl.Result{}, nil
	}
	for _, g := range r.gates() {
		st := g(ctx, s)
		if st.nextOpen != nil {
			s.gate.nextOpen = st.nextOpen
		}
		if st.closed {
			st.nextOpen = s.gate.nextOpen
			s.gate = st
			retry := st.retry
			if retry <= 0 {
				retry = gateRetry
			}
			s.requeueAfter(retry)
			break
		}
	}
	return ctrl.Result{}, nil
}

func anyWaiting(rows []nmv1alpha1.RolloutNode) bool {
	for _, row := range rows {
		if row.State == nmv1alpha1.NodeWaiting {
			return true
		}
	}
	return false
}

// setGated sets the Gated condition, status.nextWindowStart and the gate's
// line of status.blockers from the pass's gate.
func setGated(s *scope) {
	st, g := s.status, s.gate
	cond := metav1.Condition{Type: nmv1alpha1.RolloutConditionGated, Status: metav1.ConditionFalse, Reason: "GatesOpen",
		Message: "every gate is open", ObservedGeneration: s.ro.Generation}
	if g.closed {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, g.reason, g.message
		st.Blockers = append(st.Blockers, g.message)
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	st.NextWindowStart = nil
	if g.closed && g.nextOpen != nil {
		t := metav1.NewTime(g.nextOpen.Truncate(time.Second))
		st.NextWindowStart = &t
	}
}

// blockersMessage is the message's tail for what holds the next node.
func blockersMessage(blockers []string) string {
	if len(blockers) == 0 {
		return ""
	}
	return "; the next node waits: " + strings.Join(blockers, "; ")
}
