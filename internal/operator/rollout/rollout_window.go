package rollout

import (
	"context"
	"fmt"
	"time"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1/window"
)

// windowRetry bounds the wait for a window's opening: the pass that opens it
// is asked for at the opening, and at least this often before, so that a
// clock that jumps (a resumed VM, an NTP step) or a window changed by hand is
// seen soon.
const windowRetry = 5 * time.Minute

// Reason of the Gated condition while spec.window is closed.
const reasonOutsideWindow = "OutsideWindow"

// windowGate is closed outside spec.window. It holds only Waiting nodes
// (checkGates asks gates only for them): a node in progress finishes.
func windowGate(_ context.Context, s *scope) gateState {
	spec := s.ro.Spec.Window
	if spec == nil {
		return gateState{}
	}
	w, err := window.New(spec.Days, spec.Start, spec.End, spec.TimeZone)
	if err != nil {
		// Admission refuses such a window; one that got past it holds
		// the nodes rather than letting them start at any time.
		return gateState{closed: true, reason: reasonOutsideWindow, retry: windowRetry,
			message: fmt.Sprintf("spec.window cannot be read (%v): no node starts until it is fixed", err)}
	}
	if w.Open(s.now) {
		return gateState{}
	}
	next := w.Next(s.now)
	return gateState{closed: true, reason: reasonOutsideWindow, nextOpen: &next,
		retry:   min(next.Sub(s.now), windowRetry),
		message: windowMessage(w, next)}
}

// windowMessage names the window and its next opening, in its own zone and
// in UTC.
func windowMessage(w *window.Window, next time.Time) string {
	local := next.In(w.Location()).Format("Mon 2006-01-02 15:04 MST")
	return fmt.Sprintf("outside the maintenance window (%s): it opens next on %s (%s)", w, local, next.UTC().Format("2006-01-02 15:04 UTC"))
}
