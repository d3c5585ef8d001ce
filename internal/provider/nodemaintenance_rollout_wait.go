package provider

import (
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

type rollout = nmv1alpha1.NodeMaintenanceRollout

var rollouts = watchedKind[rollout, *rollout]{
	newList: func() client.ObjectList { return &nmv1alpha1.NodeMaintenanceRolloutList{} },
	first: func(l client.ObjectList) *rollout {
		if items := l.(*nmv1alpha1.NodeMaintenanceRolloutList).Items; len(items) > 0 {
			return &items[0]
		}
		return nil
	},
	status: func(r *rollout) any { return r.Status },
}

// rolloutGoal is what an apply waits for.
type rolloutGoal int

const (
	// goalEnded: the rollout ended, Succeeded or Halted (the default).
	goalEnded rolloutGoal = iota
	// goalPaused: the configuration pauses it; it is Paused, its node set
	// resolved.
	goalPaused
	// goalAccepted: wait_for_completion = false; its node set is resolved
	// (a data source gates on its end later).
	goalAccepted
)

// goal is what an apply of the configuration m waits for.
func (m rolloutResourceModel) goal() rolloutGoal {
	switch {
	case m.Paused.ValueBool():
		return goalPaused
	case !m.WaitForCompletion.IsNull() && !m.WaitForCompletion.IsUnknown() && !m.WaitForCompletion.ValueBool():
		return goalAccepted
	}
	return goalEnded
}

func (g rolloutGoal) String() string {
	switch g {
	case goalPaused:
		return "resolve its node set (paused)"
	case goalAccepted:
		return "resolve its node set (wait_for_completion = false)"
	}
	return "succeed"
}

// reached tells whether a rollout whose operator has seen the current spec
// is in a phase the goal waits for.
func (g rolloutGoal) reached(phase nmv1alpha1.RolloutPhase) bool {
	switch phase {
	case nmv1alpha1.RolloutSucceeded, nmv1alpha1.RolloutHalted:
		return true
	case nmv1alpha1.RolloutPaused:
		return g == goalPaused
	case nmv1alpha1.RolloutProgressing:
		return g == goalAccepted
	}
	return false
}

// rolloutSettled is the condition of an apply's wait: the operator has seen
// the current spec and the rollout reached the goal. A rollout that is gone
// ends the wait too.
func rolloutSettled(goal rolloutGoal) func(*rollout) bool {
	return func(r *rollout) bool {
		return r == nil || (r.Status.ObservedGeneration >= r.Generation && goal.reached(r.Status.Phase))
	}
}

// rolloutTimeline turns the statuses a wait sees into the lines of the
// apply's progress timeline (TF_LOG_PROVIDER=INFO): one when the phase
// changes, one when a node changes state.
type rolloutTimeline struct {
	name  string
	phase nmv1alpha1.RolloutPhase
	rows  map[string]nmv1alpha1.RolloutNode
}

func newRolloutTimeline(name string) *rolloutTimeline {
	return &rolloutTimeline{name: name, phase: "none", rows: map[string]nmv1alpha1.RolloutNode{}}
}

// lines are what changed since the last status seen.
func (t *rolloutTimeline) lines(r *rollout) []string {
	prefix := "NodeMaintenanceRollout " + t.name + ": "
	if r == nil {
		return []string{prefix + "gone"}
	}
	var out []string
	s := r.Status
	if s.Phase != t.phase {
		t.phase = s.Phase
		out = append(out, prefix+phaseLine(s))
	}
	for _, n := range s.Nodes {
		was, seen := t.rows[n.Name]
		t.rows[n.Name] = n
		if seen && was.State == n.State && was.Job == n.Job && was.WaitingFor == n.WaitingFor {
			continue
		}
		if !seen && n.State == nmv1alpha1.NodeWaiting && n.WaitingFor == "" {
			continue // every node starts so: only the ones that move are news
		}
		out = append(out, prefix+nodeLine(n))
	}
	return out
}

func phaseLine(s nmv1alpha1.NodeMaintenanceRolloutStatus) string {
	phase := string(s.Phase)
	if phase == "" {
		phase = "waiting for the operator"
	}
	line := fmt.Sprintf("%s, %d/%d nodes done, %d in progress, %d failed", phase, s.Done, s.Total, s.InProgress, s.Failed)
	if s.Message != "" {
		line += ": " + s.Message
	}
	return line
}

// nodeLine is one node's state: "wave 1, node a: StepRunning (Job x)".
func nodeLine(n nmv1alpha1.RolloutNode) string {
	line := fmt.Sprintf("wave %d, node %s: %s", n.Wave, n.Name, n.State)
	var about []string
	switch {
	case n.WaitingFor != "":
		about = append(about, "waits for NodeMaintenance "+n.WaitingFor)
	case n.State == nmv1alpha1.NodeStepRunning && n.Job != "":
		about = append(about, "Job "+n.Job)
	case n.State == nmv1alpha1.NodeDraining && n.Maintenance != "":
		about = append(about, "NodeMaintenance "+n.Maintenance)
	}
	if n.Reason != "" && (n.State == nmv1alpha1.NodeFailed || n.State == nmv1alpha1.NodeWaiting) {
		about = append(about, n.Reason)
	}
	if len(about) > 0 {
		line += " (" + strings.Join(about, "; ") + ")"
	}
	return line
}

// failedNodes lists the failed rows, one a line, with where to look.
func failedNodes(r *rollout) string {
	var b strings.Builder
	for _, n := range r.Status.Nodes {
		if n.State != nmv1alpha1.NodeFailed {
			continue
		}
		fmt.Fprintf(&b, "  - node %s (wave %d", n.Name, n.Wave)
		if n.Maintenance != "" {
			fmt.Fprintf(&b, ", NodeMaintenance %s", n.Maintenance)
		}
		if n.Job != "" {
			fmt.Fprintf(&b, ", Job %s", n.Job)
		}
		reason := n.Reason
		if reason == "" {
			reason = "no reason recorded"
		}
		fmt.Fprintf(&b, "): %s\n", terraformNames(reason))
	}
	return b.String()
}

// haltedDetail explains a Halted rollout found by op (create or update), in
// the resource's names (the operator words spec.drain.timeout, not
// drain.timeout).
func haltedDetail(r *rollout, op string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "NodeMaintenanceRollout %q halted after %d of %d nodes: %s\n\n", r.Name, r.Status.Done, r.Status.Total, terraformNames(orNone(r.Status.Message)))
	if failed := failedNodes(r); failed != "" {
		b.WriteString("Failed nodes:\n" + failed + "\n")
	}
	b.WriteString("No further node starts. A failed node stays as its maintenance left it (with drain.on_timeout \"Fail\", cordoned): " +
		"see `kubectl describe nm <NodeMaintenance>` and, for a step, `kubectl logs job/<Job> -n <namespace>`.\n\n")
	if op == "update" {
		b.WriteString("The resource stays in the state with this status: `terraform destroy` deletes the rollout and restores every node it " +
			"holds; to start over, fix the cause and `terraform apply -replace=<address>`.")
	} else {
		b.WriteString("The resource is kept in the state as tainted: `terraform destroy` deletes the rollout and restores every node it holds, " +
			"and the next `apply` replaces it (starts the rollout over) once the cause is fixed.")
	}
	return b.String()
}

// inFlight lists the nodes that are neither waiting nor finished.
func inFlight(r *rollout) string {
	var parts []string
	for _, n := range r.Status.Nodes {
		if n.State != nmv1alpha1.NodeWaiting && n.State != nmv1alpha1.NodeDone && n.State != nmv1alpha1.NodeFailed {
			parts = append(parts, nodeLine(n))
		}
	}
	return orNone(strings.Join(parts, "; "))
}

// rolloutTimeoutDetail explains what is still going on when the wait ends.
func rolloutTimeoutDetail(name string, r *rollout, timeout time.Duration, cause error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "NodeMaintenanceRollout %q did not finish within the timeout (%s): %v.\n\n", name, timeout, cause)
	switch {
	case r == nil:
		b.WriteString("The rollout was not seen.\n")
	case r.Status.Phase == "":
		b.WriteString("The operator has not picked it up: is the node-maintenance operator running, in a version that knows rollouts?\n")
	default:
		fmt.Fprintf(&b, "%s.\nNodes in progress: %s\n", phaseLine(r.Status), inFlight(r))
	}
	b.WriteString("\nThe rollout goes on in the cluster. It is kept in the state as tainted: `terraform destroy` deletes it and restores " +
		"every node it holds. To let it finish instead, raise the timeout (`timeouts { create = \"4h\" }`) and apply again, which " +
		"replaces it and starts over; or untaint it (`terraform untaint <address>`) and apply, which waits for it.")
	return b.String()
}

// rolloutInterruptedDetail explains what an interrupted wait leaves behind.
func rolloutInterruptedDetail(name string, r *rollout) string {
	where := "The operator has not reported progress yet."
	if r != nil && r.Status.Phase != "" {
		where = phaseLine(r.Status) + "."
	}
	return fmt.Sprintf("The wait for NodeMaintenanceRollout %q was interrupted; the rollout itself goes on in the cluster. %s\n\n"+
		"It is kept in the state (not tainted): the next `apply` waits for it without starting it again, and `destroy` deletes it and "+
		"restores every node it holds.", name, where)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
