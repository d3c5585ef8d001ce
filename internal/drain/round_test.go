package drain

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestPendingAfterDropsGonePods(t *testing.T) {
	plan := Plan{ToEvict: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "b"}}}}
	results := []EvictionResult{{Pod: types.NamespacedName{Namespace: "n", Name: "a"}, Outcome: Gone}, {Pod: types.NamespacedName{Namespace: "n", Name: "b"}, Outcome: Evicted}}
	if got := NewRound(plan, results).Pending; len(got) != 1 || got[0].Name != "b" {
		t.Fatalf("pending after = %v", got)
	}
}

// A round leaves pods to evict until every pod to evict (and, after them,
// every pod to evict last) was evicted or found gone by its calls, or is one
// the caller evicted moments ago.
func TestRoundEvicting(t *testing.T) {
	a, b, op := pod("a"), pod("b"), pod("operator")
	res := func(name string, o Outcome) EvictionResult {
		return EvictionResult{Pod: types.NamespacedName{Namespace: "ns", Name: name}, Outcome: o}
	}
	earlier := func(p *corev1.Pod) bool { return p.Name == "b" }
	for _, tc := range []struct {
		name    string
		plan    Plan
		results []EvictionResult
		evicted func(*corev1.Pod) bool
		want    bool
	}{
		{"every eviction accepted", Plan{ToEvict: []corev1.Pod{a, b}}, []EvictionResult{res("a", Evicted), res("b", Gone)}, nil, false},
		{"one refused by a budget", Plan{ToEvict: []corev1.Pod{a, b}}, []EvictionResult{res("a", Evicted), res("b", Blocked)}, nil, true},
		{"one failed", Plan{ToEvict: []corev1.Pod{a, b}}, []EvictionResult{res("a", Evicted), res("b", Failed)}, nil, true},
		{"one not called", Plan{ToEvict: []corev1.Pod{a, b}}, []EvictionResult{res("a", Evicted)}, nil, true},
		{"one evicted by an earlier round moments ago", Plan{ToEvict: []corev1.Pod{a, b}}, []EvictionResult{res("a", Evicted)}, earlier, false},
		{"pods to evict last are left", Plan{ToEvict: []corev1.Pod{a}, Last: []corev1.Pod{op}}, []EvictionResult{res("a", Evicted)}, nil, true},
		{"the last pod evicted", Plan{Last: []corev1.Pod{op}}, []EvictionResult{res("operator", Evicted)}, nil, false},
		{"only terminating pods", Plan{Terminating: []corev1.Pod{a}}, nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NewRound(tc.plan, tc.results).Evicting(tc.evicted); got != tc.want {
				t.Errorf("Evicting() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSummarizeBoundsLastError(t *testing.T) {
	var problems []string
	for i := 0; i < 5; i++ {
		problems = append(problems, fmt.Sprint("p", i))
	}
	if got := summarize(problems); got != "p0; p1; p2; and 2 more" {
		t.Fatalf("summarize = %q", got)
	}
	if got := summarize(nil); got != "" {
		t.Fatalf("summarize(nil) = %q", got)
	}
}

// FuzzSummarizeBoundsLastError checks lastError as summarize builds it from
// one pass's problems (one per blocked or failed pod, in pod order):
//   - up to MaxProblems problems are joined with "; ", in order;
//   - beyond that, only the first ones appear, then "; and N more" with the
//     exact N, so lastError is bounded by three messages and a count however
//     many pods are blocked;
//   - it is valid UTF-8 when the messages it keeps are, and empty only when
//     there is no problem or the problems it keeps are empty;
//   - problems are not changed.
//
// joined holds the problems separated by "\x1f"; more adds up to 511 problems
// of 100 bytes after them (kept small: each exec allocates them).
func FuzzSummarizeBoundsLastError(f *testing.F) {
	f.Add("", uint16(0))
	f.Add("pod n/a is blocked by a PodDisruptionBudget: The disruption budget web needs 5 healthy pods and has 5 currently", uint16(0))
	f.Add("p0\x1fp1\x1fp2", uint16(0))
	f.Add("p0\x1fp1\x1fp2\x1fp3\x1fp4", uint16(0))
	f.Add("p0\x1fp1\x1fp2", uint16(9999))
	f.Add("\x1f\x1f", uint16(1))
	f.Add("a; b\x1fc; and 2 more", uint16(0))
	f.Add("硬體\x1f\xff\xfe\x1fé", uint16(3))
	f.Add(strings.Repeat("x", 4096), uint16(511))
	f.Fuzz(func(t *testing.T, joined string, more uint16) {
		var problems []string
		if joined != "" {
			problems = strings.Split(joined, "\x1f")
		}
		filler := strings.Repeat("y", 80)
		for i := 0; i < int(more%512); i++ {
			problems = append(problems, fmt.Sprintf("pod n/p%d failed: %s", i, filler))
		}
		before := slices.Clone(problems)
		got := summarize(problems)
		if !slices.Equal(problems, before) {
			t.Fatalf("summarize changed its argument")
		}
		kept := problems[:min(len(problems), MaxProblems)]
		want := strings.Join(kept, "; ")
		if extra := len(problems) - len(kept); extra > 0 {
			want += fmt.Sprintf("; and %d more", extra)
		}
		if got != want {
			t.Fatalf("summarize(%d problems) = %q, want %q", len(problems), got, want)
		}
		bound := len(kept)*len("; ") + len("; and  more") + len(strconv.Itoa(len(problems)))
		for _, p := range kept {
			bound += len(p)
		}
		if len(got) > bound {
			t.Fatalf("lastError is %d bytes, more than the %d of the kept messages and a count", len(got), bound)
		}
		keptValid := true
		for _, p := range kept {
			keptValid = keptValid && utf8.ValidString(p)
		}
		if keptValid && !utf8.ValidString(got) {
			t.Fatalf("lastError %q is not valid UTF-8 though the messages it keeps are", got)
		}
		if got == "" && len(problems) > 0 && strings.Join(kept, "") != "" {
			t.Fatalf("lastError empty with %d problems", len(problems))
		}
	})
}

// Problems name each cause once with the pods it holds: refusals by the same
// budget (same namespace, same words) are one line, interrupted evictions
// come first, failures are grouped by their error without the pod's name.
func TestRoundProblemsGroupedByCause(t *testing.T) {
	key := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	web := "The disruption budget web needs 5 healthy pods and has 5 currently"
	boom := errors.New("the server is currently unable to handle the request")
	results := []EvictionResult{
		{Pod: key("shop", "web-1"), Outcome: Blocked, Message: web},
		{Pod: key("shop", "web-2"), Outcome: Blocked, Message: web},
		{Pod: key("shop", "web-3"), Outcome: Evicted},
		{Pod: key("tea", "web-1"), Outcome: Blocked, Message: web},
		{Pod: key("x", "a"), Outcome: Failed, Err: fmt.Errorf("evict pod x/a: %w", boom)},
		{Pod: key("x", "b"), Outcome: Failed, Err: fmt.Errorf("evict pod x/b: %w", boom)},
	}
	round := Round{Results: results, Interrupted: []InterruptedEviction{{Budget: key("shop", "web"), Pod: key("shop", "web-0"), Since: time.Unix(0, 0)}}}
	got := round.Problems()
	want := []string{
		round.Interrupted[0].String(),
		"2 pods (shop/web-1, shop/web-2) are blocked by a PodDisruptionBudget: " + web,
		"pod tea/web-1 is blocked by a PodDisruptionBudget: " + web,
		"evict 2 pods (x/a, x/b): " + boom.Error(),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Problems() =\n%q\nwant\n%q", got, want)
	}
	if msg := round.Message(); msg != strings.Join(want[:MaxProblems], "; ")+"; and 1 more" {
		t.Fatalf("Message() = %q", msg)
	}
	if ns := round.BlockedNamespaces(); !slices.Equal(ns, []string{"shop", "tea"}) {
		t.Fatalf("BlockedNamespaces() = %v", ns)
	}
	reasons := round.FailureReasons()
	if reasons[string(policyv1.DisruptionBudgetCause)] != 3 || reasons[string(metav1.StatusReasonUnknown)] != 2 || len(reasons) != 2 {
		t.Fatalf("FailureReasons() = %v", reasons)
	}
	if !round.Refused() || round.Count(Blocked) != 3 || round.Count(Evicted) != 1 {
		t.Fatalf("Refused() = %v, Count(Blocked) = %d, Count(Evicted) = %d", round.Refused(), round.Count(Blocked), round.Count(Evicted))
	}
}

// One cause names at most five pods and counts the others.
func TestRoundProblemsBoundPodNames(t *testing.T) {
	var results []EvictionResult
	for i := range 8 {
		results = append(results, EvictionResult{Pod: types.NamespacedName{Namespace: "n", Name: fmt.Sprint("p", i)}, Outcome: Blocked, Message: "no"})
	}
	got := Round{Results: results}.Problems()
	want := "8 pods (n/p0, n/p1, n/p2, n/p3, n/p4 and 3 more) are blocked by a PodDisruptionBudget: no"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("Problems() = %q, want [%q]", got, want)
	}
	if msg := (Round{}).Message(); msg != "" {
		t.Fatalf("a round without refusals has message %q", msg)
	}
}

func TestSkippedSummary(t *testing.T) {
	plan := Plan{Skipped: map[types.NamespacedName]string{
		{Namespace: "a", Name: "ds-1"}: SkipDaemonSet, {Namespace: "b", Name: "ds-2"}: SkipDaemonSet, {Namespace: "a", Name: "static"}: SkipMirror,
	}}
	if got, want := plan.SkippedSummary(), "DaemonSet pod (2), mirror (static) pod (1)"; got != want {
		t.Fatalf("SkippedSummary() = %q, want %q", got, want)
	}
	if got := (Plan{}).SkippedSummary(); got != "" {
		t.Fatalf("SkippedSummary() of no skipped pod = %q", got)
	}
}
