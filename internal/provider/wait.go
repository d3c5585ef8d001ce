package provider

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// rewatchDelay spaces re-lists when the API server keeps closing the watch.
const rewatchDelay = 500 * time.Millisecond

// waitCondition decides, from the current object (nil when it does not exist),
// whether waiting is over.
type waitCondition func(nm *nmv1beta1.NodeMaintenance) bool

// watchedKind says how waitForObject lists one kind of object by name and
// what of it is reported as a change: its status.
type watchedKind[T any, P interface {
	*T
	client.Object
}] struct {
	newList func() client.ObjectList
	// first is the list's object, nil when it is empty.
	first  func(client.ObjectList) P
	status func(P) any
}

var maintenances = watchedKind[nmv1beta1.NodeMaintenance, *nmv1beta1.NodeMaintenance]{
	newList: func() client.ObjectList { return &nmv1beta1.NodeMaintenanceList{} },
	first: func(l client.ObjectList) *nmv1beta1.NodeMaintenance {
		if items := l.(*nmv1beta1.NodeMaintenanceList).Items; len(items) > 0 {
			return &items[0]
		}
		return nil
	},
	status: func(nm *nmv1beta1.NodeMaintenance) any { return nm.Status },
}

// waitFor watches one NodeMaintenance until cond holds (see waitForObject).
func waitFor(ctx context.Context, c client.WithWatch, name string, cond waitCondition, onChange func(*nmv1beta1.NodeMaintenance)) (*nmv1beta1.NodeMaintenance, error) {
	return waitForObject(ctx, c, maintenances, name, cond, onChange)
}

// waitForObject watches one object until cond holds, and returns the last
// object seen (nil when gone). It lists once, then follows a watch from that
// resourceVersion; when the watch ends (API server restart, timeout) it lists
// again, so no change is missed and nothing polls. onChange is called whenever
// the status differs from the last one seen.
func waitForObject[T any, P interface {
	*T
	client.Object
}](ctx context.Context, c client.WithWatch, kind watchedKind[T, P], name string, cond func(P) bool, onChange func(P)) (P, error) {
	var last P
	reported := false
	seen := func(o P) bool {
		changed := !reported || (o == nil) != (last == nil) || (o != nil && last != nil && !reflect.DeepEqual(kind.status(o), kind.status(last)))
		if onChange != nil && changed {
			onChange(o)
		}
		reported, last = true, o
		return cond(o)
	}
	selector := client.MatchingFields{"metadata.name": name}
	first := true
	for {
		if !first {
			select {
			case <-ctx.Done():
				return last, ctx.Err()
			case <-time.After(rewatchDelay):
			}
		}
		list := kind.newList()
		if err := c.List(ctx, list, selector); err != nil {
			if ctx.Err() != nil {
				return last, ctx.Err()
			}
			if first {
				return last, err
			}
			continue // a transient failure while waiting: list again
		}
		current := kind.first(list)
		if seen(current) {
			return current, nil
		}
		first = false

		w, err := c.Watch(ctx, kind.newList(), selector,
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion(), AllowWatchBookmarks: true}})
		if err != nil {
			if ctx.Err() != nil {
				return last, ctx.Err()
			}
			continue
		}
		done, result := follow(ctx, w, seen)
		w.Stop()
		if done {
			return result, nil
		}
		if ctx.Err() != nil {
			return last, ctx.Err()
		}
	}
}

// follow consumes watch events until cond holds (done) or the watch ends.
func follow[P client.Object](ctx context.Context, w watch.Interface, seen func(P) bool) (bool, P) {
	var none P
	for {
		select {
		case <-ctx.Done():
			return false, none
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, none
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				o, ok := ev.Object.(P)
				if ok && seen(o) {
					return true, o
				}
			case watch.Deleted:
				if seen(none) {
					return true, none
				}
			case watch.Error:
				return false, none
			}
		}
	}
}

// finished is the create condition: the operator reached a final phase.
func finished(nm *nmv1beta1.NodeMaintenance) bool {
	return nm == nil || nm.Status.Phase == nmv1beta1.MaintenanceSucceeded || nm.Status.Phase == nmv1beta1.MaintenanceFailed
}

// gone is the delete condition.
func gone(nm *nmv1beta1.NodeMaintenance) bool { return nm == nil }

// progressLine is one line of the apply timeline (TF_LOG=INFO).
func progressLine(name string, nm *nmv1beta1.NodeMaintenance) string {
	if nm == nil {
		return fmt.Sprintf("NodeMaintenance %s: gone", name)
	}
	s := nm.Status
	phase := string(s.Phase)
	if phase == "" {
		phase = "waiting for the operator"
	}
	if q := queuedBehind(nm); q != "" {
		return fmt.Sprintf("NodeMaintenance %s (node %s): %s", name, nm.Spec.NodeName, q)
	}
	line := fmt.Sprintf("NodeMaintenance %s (node %s): %s, %d%% drained", name, nm.Spec.NodeName, phase, s.DrainProgress)
	if n := len(s.PendingPodsRefs); n > 0 {
		line += fmt.Sprintf(", %d pending: %s", n, refList(s.PendingPodsRefs, 5))
	}
	if s.LastError != "" {
		line += "; last error: " + s.LastError
	}
	return line
}

// queuedBehind is the operator's account of a maintenance that waits for a
// slot under max_unavailable ("queued behind maintain-node01, ...: ..."),
// empty when it does not wait.
func queuedBehind(nm *nmv1beta1.NodeMaintenance) string {
	if nm == nil || !meta.IsStatusConditionTrue(nm.Status.Conditions, nmv1beta1.ConditionQueued) {
		return ""
	}
	if c := meta.FindStatusCondition(nm.Status.Conditions, nmv1beta1.ConditionQueued); c.Message != "" {
		return c.Message
	}
	return "queued behind other maintenances (max_unavailable)"
}

func refList(refs []nmv1beta1.PodReference, limit int) string {
	parts := make([]string, 0, min(len(refs), limit))
	for i, r := range refs {
		if i == limit {
			break
		}
		parts = append(parts, r.Namespace+"/"+r.Name)
	}
	s := strings.Join(parts, ", ")
	if len(refs) > limit {
		s += fmt.Sprintf(" and %d more", len(refs)-limit)
	}
	return s
}

// failedDetail explains a Failed maintenance found by op (apply: a create,
// update: an apply that waited for a drain started earlier).
func failedDetail(nm *nmv1beta1.NodeMaintenance, op string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The operator could not put node %q into maintenance (NodeMaintenance %q is Failed).\n\n", nm.Spec.NodeName, nm.Name)
	if nm.Status.LastError != "" {
		fmt.Fprintf(&b, "Operator error: %s\n", nm.Status.LastError)
	}
	if len(nm.Status.PendingPodsRefs) > 0 {
		fmt.Fprintf(&b, "Pods still on the node: %s\n", refList(nm.Status.PendingPodsRefs, 10))
	}
	if op == "update" {
		b.WriteString("\nThe resource stays in the state with this status: `terraform destroy` restores the node; to try again, " +
			"replace it with `terraform apply -replace=<address>`.")
	} else {
		b.WriteString("\nThe resource is kept in the state as tainted: `terraform destroy` restores the node, and the next `apply` replaces it (tries again).")
	}
	return b.String()
}

// interruptedDetail explains what an interrupted wait leaves behind.
func interruptedDetail(name string, nm *nmv1beta1.NodeMaintenance) string {
	where := "The operator has not reported progress yet."
	switch {
	case queuedBehind(nm) != "":
		where = fmt.Sprintf("It is %s.", queuedBehind(nm))
	case nm != nil && nm.Status.Phase != "":
		where = fmt.Sprintf("Phase %s, %d%% drained.", nm.Status.Phase, nm.Status.DrainProgress)
	}
	return fmt.Sprintf("The wait for NodeMaintenance %q was interrupted; the maintenance itself goes on in the cluster and "+
		"the operator keeps draining the node. %s\n\nIt is kept in the state (not tainted): the next `apply` waits for the "+
		"drain to finish without starting it again, and `destroy` restores the node.", name, where)
}

// timeoutDetail explains what is still pending when the create timeout ends.
func timeoutDetail(name string, nm *nmv1beta1.NodeMaintenance, timeout time.Duration, cause error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "NodeMaintenance %q did not finish within the create timeout (%s): %v.\n\n", name, timeout, cause)
	switch {
	case nm == nil:
		b.WriteString("The NodeMaintenance was not seen.\n")
	case nm.Status.Phase == "":
		b.WriteString("The operator has not picked it up: is the node-maintenance operator running?\n")
	case queuedBehind(nm) != "":
		fmt.Fprintf(&b, "It never started: it is %s.\n\n", queuedBehind(nm))
		fmt.Fprintf(&b, "Node %s is not cordoned; the NodeMaintenance stays queued in the cluster and the operator starts it when a slot frees. "+
			"The create timeout counts the time in the queue: raise it with `timeouts { create = \"2h\" }`, or end a maintenance ahead of it. "+
			"The resource is kept in the state as tainted: `terraform destroy` leaves the queue, and the next `apply` replaces it, "+
			"which leaves the queue and joins it again at the end.", nm.Spec.NodeName)
		return b.String()
	default:
		fmt.Fprintf(&b, "Phase %s, %d%% drained.\n", nm.Status.Phase, nm.Status.DrainProgress)
		if len(nm.Status.PendingPodsRefs) > 0 {
			fmt.Fprintf(&b, "Still pending: %s\n", refList(nm.Status.PendingPodsRefs, 10))
		}
		if nm.Status.LastError != "" {
			fmt.Fprintf(&b, "Blocked by: %s\n", nm.Status.LastError)
		}
	}
	b.WriteString("\nThe node stays cordoned and the operator keeps draining. Raise the timeout with " +
		"`timeouts { create = \"60m\" }`, fix what blocks the pods (for example a PodDisruptionBudget that allows no disruption), " +
		"then apply again; or destroy to restore the node.")
	return b.String()
}
