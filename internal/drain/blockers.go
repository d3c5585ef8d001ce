package drain

import (
	"fmt"
	"slices"
	"strings"
)

// budgetPrefix starts the API server's words for a budget's refusal:
// "The disruption budget web needs 5 healthy pods and has 5 currently".
const budgetPrefix = "The disruption budget "

// Blockers are what holds the drain, one line each, sorted and without the
// counts that change from round to round: the PodDisruptionBudgets that
// refused evictions, the causes of failed evictions, and the pods kept for
// their emptyDir data. Two rounds held by the same things have the same
// Blockers, so a notification of them is sent again only when they change.
func (r Round) Blockers() []string {
	var out []string
	for i := range r.Plan.LocalData {
		out = append(out, fmt.Sprintf("pod %s has emptyDir data and spec.drain.deleteEmptyDirData is false", nameOf(&r.Plan.LocalData[i])))
	}
	for _, res := range r.Results {
		switch res.Outcome {
		case Blocked:
			out = append(out, budgetBlocker(res.Pod.Namespace, res.Message))
		case Failed:
			out = append(out, "eviction refused: "+failureCause(res))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// budgetBlocker names the budget of a refusal, namespace/name, when the
// refusal says it, and its namespace otherwise.
func budgetBlocker(namespace, message string) string {
	if rest, ok := strings.CutPrefix(message, budgetPrefix); ok {
		if name, _, ok := strings.Cut(rest, " "); ok && name != "" {
			return fmt.Sprintf("PodDisruptionBudget %s/%s", namespace, name)
		}
	}
	return "a PodDisruptionBudget in namespace " + namespace
}
