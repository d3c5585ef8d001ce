package drain

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// MaxProblems bounds how many causes Round.Message quotes; the others are
// counted. Many pods blocked by one budget are one cause.
const MaxProblems = 3

// maxPodsPerProblem bounds the pods one cause names; the others are counted.
const maxPodsPerProblem = 5

// Round is one drain pass over a node: the plan it started from, what its
// eviction calls did, and what is left. It words its own summary, so the
// caller copies counts and messages into status, events and metrics without
// counting or summarising anything itself.
type Round struct {
	// Plan is the classification the round started from.
	Plan Plan
	// Results are the eviction calls the round made, sorted by pod.
	Results []EvictionResult
	// Pending are the pods that must still leave the node, sorted by
	// namespace and name: terminating, just evicted, refused, or evicted
	// moments ago by an earlier round. Pods the API reported gone are not.
	Pending []corev1.Pod
	// Interrupted explains refusals that end on their own: budgets charged
	// for a pod an interrupted eviction never deleted (InterruptedEvictions).
	// The caller sets it, from the budgets in BlockedNamespaces.
	Interrupted []InterruptedEviction
}

// NewRound is the round that made results from plan.
func NewRound(plan Plan, results []EvictionResult) Round {
	pending := pendingAfter(plan, results)
	sortPods(pending)
	return Round{Plan: plan, Results: results, Pending: pending}
}

// pendingAfter is every pod of the plan still on the node after the
// evictions: the terminating ones, those just evicted (terminating now) and
// those refused. Pods the API reported gone are not pending.
func pendingAfter(plan Plan, results []EvictionResult) []corev1.Pod {
	gone := map[types.NamespacedName]bool{}
	for _, r := range results {
		if r.Outcome == Gone {
			gone[r.Pod] = true
		}
	}
	var out []corev1.Pod
	for _, p := range plan.Pending() {
		if !gone[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] {
			out = append(out, p)
		}
	}
	return out
}

// Done reports whether no pod has to leave the node any more.
func (r Round) Done() bool { return len(r.Pending) == 0 }

// Evicting reports whether the round leaves pods to evict: a pod of the
// plan to evict (or to evict last) that no call of this round evicted or
// found gone, and that evicted (the caller's memory of evictions an earlier
// round made moments ago, which the plan's pods may not show yet; nil is
// none) does not report. A round whose every eviction was accepted leaves
// only pods on their way out, which the drain waits for.
func (r Round) Evicting(evicted func(*corev1.Pod) bool) bool {
	done := map[types.NamespacedName]bool{}
	for _, res := range r.Results {
		if res.Outcome == Evicted || res.Outcome == Gone {
			done[res.Pod] = true
		}
	}
	for _, pods := range [][]corev1.Pod{r.Plan.ToEvict, r.Plan.Last} {
		for i := range pods {
			if !done[types.NamespacedName{Namespace: pods[i].Namespace, Name: pods[i].Name}] && (evicted == nil || !evicted(&pods[i])) {
				return true
			}
		}
	}
	return false
}

// Count is the number of eviction calls with outcome o.
func (r Round) Count(o Outcome) int {
	n := 0
	for _, res := range r.Results {
		if res.Outcome == o {
			n++
		}
	}
	return n
}

// Refused reports whether an eviction was blocked or failed: the caller
// retries with a backoff instead of waiting for the pods to go.
func (r Round) Refused() bool { return r.Count(Blocked)+r.Count(Failed) > 0 }

// BlockedNamespaces are the namespaces of the blocked pods, sorted: where the
// budgets that refused them live.
func (r Round) BlockedNamespaces() []string {
	var out []string
	for _, res := range r.Results {
		if res.Outcome == Blocked && !slices.Contains(out, res.Pod.Namespace) {
			out = append(out, res.Pod.Namespace)
		}
	}
	slices.Sort(out)
	return out
}

// FailureReasons counts the refused evictions by reason, for metrics: a
// budget's refusal is policyv1.DisruptionBudgetCause, any other failure the
// API error's reason.
func (r Round) FailureReasons() map[string]int {
	out := map[string]int{}
	for _, res := range r.Results {
		switch res.Outcome {
		case Blocked:
			out[string(policyv1.DisruptionBudgetCause)]++
		case Failed:
			out[string(apierrors.ReasonForError(res.Err))]++
		}
	}
	return out
}

// Problems says why pods are still on the node, one line per cause: first
// the pods the policy keeps from being evicted (spec.drain.deleteEmptyDirData
// false: only someone else can remove them), then the interrupted evictions
// (they need no one to act and end on their own), then each budget refusal
// with the pods it holds, then each failure with its pods, in pod order.
func (r Round) Problems() []string {
	out := make([]string, 0, len(r.Interrupted)+1)
	if len(r.Plan.LocalData) > 0 {
		out = append(out, localDataProblem(r.Plan.LocalData))
	}
	for _, e := range r.Interrupted {
		out = append(out, e.String())
	}
	type cause struct {
		blocked bool
		text    string
	}
	var order []cause
	pods := map[cause][]types.NamespacedName{}
	for _, res := range r.Results {
		var c cause
		switch res.Outcome {
		case Blocked:
			// The refusal names the budget, not its namespace.
			c = cause{blocked: true, text: res.Pod.Namespace + "\x00" + res.Message}
		case Failed:
			c = cause{text: failureCause(res)}
		default:
			continue
		}
		if _, seen := pods[c]; !seen {
			order = append(order, c)
		}
		pods[c] = append(pods[c], res.Pod)
	}
	for _, c := range order {
		names, n := podList(pods[c]), len(pods[c])
		switch {
		case c.blocked && n == 1:
			out = append(out, fmt.Sprintf("pod %s is blocked by a PodDisruptionBudget: %s", names, budgetMessage(c.text)))
		case c.blocked:
			out = append(out, fmt.Sprintf("%d pods (%s) are blocked by a PodDisruptionBudget: %s", n, names, budgetMessage(c.text)))
		case n == 1:
			out = append(out, fmt.Sprintf("evict pod %s: %s", names, c.text))
		default:
			out = append(out, fmt.Sprintf("evict %d pods (%s): %s", n, names, c.text))
		}
	}
	return out
}

// localDataProblem words the pods kept by spec.drain.deleteEmptyDirData
// false: what happens, and what to do.
func localDataProblem(pods []corev1.Pod) string {
	names := make([]types.NamespacedName, 0, len(pods))
	for i := range pods {
		names = append(names, nameOf(&pods[i]))
	}
	what, it, is := fmt.Sprintf("pod %s has", podList(names)), "it", "it is"
	if len(pods) > 1 {
		what, it, is = fmt.Sprintf("%d pods (%s) have", len(pods), podList(names)), "them", "they are"
	}
	return fmt.Sprintf("%s emptyDir data and spec.drain.deleteEmptyDirData is false: the drain does not evict %s, as kubectl drain "+
		"without --delete-emptydir-data, and waits until %s gone. Delete %s yourself, or replace this NodeMaintenance with one "+
		"that allows deleteEmptyDirData", what, it, is, it)
}

// Message is what the round leaves unexplained in one bounded line, for
// the status's lastError: the first MaxProblems causes and how many more.
// It is empty when nothing was refused.
func (r Round) Message() string { return summarize(r.Problems()) }

// summarize joins the first problems, saying how many more there are.
func summarize(problems []string) string {
	if len(problems) <= MaxProblems {
		return strings.Join(problems, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(problems[:MaxProblems], "; "), len(problems)-MaxProblems)
}

// failureCause is a failed eviction's error without the pod it names first.
func failureCause(res EvictionResult) string {
	if cause := errors.Unwrap(res.Err); cause != nil {
		return cause.Error()
	}
	return res.Message
}

func budgetMessage(key string) string {
	_, msg, _ := strings.Cut(key, "\x00")
	return msg
}

// podList names up to maxPodsPerProblem pods and counts the others.
func podList(pods []types.NamespacedName) string {
	names := make([]string, 0, min(len(pods), maxPodsPerProblem))
	for _, p := range pods[:min(len(pods), maxPodsPerProblem)] {
		names = append(names, p.String())
	}
	s := strings.Join(names, ", ")
	if extra := len(pods) - len(names); extra > 0 {
		s += fmt.Sprintf(" and %d more", extra)
	}
	return s
}
