package drain

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Blockers name each budget, failure cause and kept pod once, without the
// counts of the budget's words: a later round held by the same budget, with
// other counts and other pods, has the same Blockers.
func TestBlockersStayTheSameWhileTheSameThingsHold(t *testing.T) {
	key := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	boom := errors.New("the server is currently unable to handle the request")
	local := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "cache-0"}}
	round := func(healthy int, pods ...string) Round {
		msg := fmt.Sprintf("The disruption budget web needs 5 healthy pods and has %d currently", healthy)
		r := Round{Plan: Plan{LocalData: []corev1.Pod{local}}}
		for _, p := range pods {
			r.Results = append(r.Results, EvictionResult{Pod: key("shop", p), Outcome: Blocked, Message: msg})
		}
		r.Results = append(r.Results,
			EvictionResult{Pod: key("tea", "x"), Outcome: Blocked, Message: "Cannot evict pod as it would violate the pod's disruption budget."},
			EvictionResult{Pod: key("x", "a"), Outcome: Failed, Err: fmt.Errorf("evict pod x/a: %w", boom)},
			EvictionResult{Pod: key("x", "b"), Outcome: Failed, Err: fmt.Errorf("evict pod x/b: %w", boom)},
			EvictionResult{Pod: key("x", "c"), Outcome: Evicted})
		return r
	}
	first, later := round(5, "web-1", "web-2"), round(4, "web-3")
	want := []string{
		"PodDisruptionBudget shop/web",
		"a PodDisruptionBudget in namespace tea",
		"eviction refused: " + boom.Error(),
		"pod db/cache-0 has emptyDir data and spec.drain.deleteEmptyDirData is false",
	}
	if got := first.Blockers(); !slices.Equal(got, want) {
		t.Fatalf("Blockers() =\n%q\nwant\n%q", got, want)
	}
	if got := later.Blockers(); !slices.Equal(got, want) {
		t.Fatalf("a round held by the same things has Blockers()\n%q\nwant\n%q", got, want)
	}
	if got := (Round{Results: []EvictionResult{{Pod: key("a", "b"), Outcome: Evicted}}}).Blockers(); len(got) != 0 {
		t.Fatalf("a round nothing holds has Blockers() %q", got)
	}
}
