package drain

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func TestEvictClassifiesAPIAnswers(t *testing.T) {
	podGR := schema.GroupResource{Resource: "pods"}
	pdbRefusal := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	pdbRefusal.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web needs 5 healthy pods and has 5 currently"}}
	answers := map[string]error{
		"ok":      nil,
		"gone":    apierrors.NewNotFound(podGR, "gone"),
		"blocked": pdbRefusal,
		"broken":  errors.New("connection reset"),
	}
	var calls atomic.Int32
	evictor := EvictorFunc(func(_ context.Context, p *corev1.Pod, _ *int64) error {
		calls.Add(1)
		return answers[p.Name]
	})
	results := Evict(context.Background(), evictor, []corev1.Pod{pod("ok"), pod("gone"), pod("blocked"), pod("broken")}, 2, nil)
	if calls.Load() != 4 {
		t.Fatalf("%d eviction calls, want exactly one per pod", calls.Load())
	}
	want := map[string]Outcome{"ok": Evicted, "gone": Gone, "blocked": Blocked, "broken": Failed}
	for _, r := range results {
		if r.Outcome != want[r.Pod.Name] {
			t.Errorf("%s: outcome %s, want %s", r.Pod.Name, r.Outcome, want[r.Pod.Name])
		}
	}
	if results[0].Pod.Name != "blocked" || results[0].Message != "The disruption budget web needs 5 healthy pods and has 5 currently" {
		t.Errorf("blocked result should carry the PDB's words and results be sorted: %+v", results[0])
	}
	if results[1].Err == nil || results[1].Message != "evict pod ns/broken: connection reset" {
		t.Errorf("failed result should wrap the error with the pod: %+v", results[1])
	}
}

// An eviction call that has started survives the cancellation of the pass
// (a half-done eviction blocks its PDB for two minutes); calls not started
// when the pass is cancelled are not made.
func TestEvictFinishesInFlightCallsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	var calls atomic.Int32
	evictor := EvictorFunc(func(callCtx context.Context, p *corev1.Pod, _ *int64) error {
		calls.Add(1)
		close(started)
		time.Sleep(50 * time.Millisecond) // the pass is cancelled meanwhile
		return callCtx.Err()
	})
	go func() { <-started; cancel() }()
	results := Evict(ctx, evictor, []corev1.Pod{pod("a"), pod("b")}, 1, nil)
	if calls.Load() != 1 {
		t.Fatalf("%d calls, want only the one in flight", calls.Load())
	}
	byName := map[string]EvictionResult{}
	for _, r := range results {
		byName[r.Pod.Name] = r
	}
	if byName["a"].Outcome != Evicted {
		t.Errorf("the in-flight eviction was cut off: %+v", byName["a"])
	}
	if byName["b"].Outcome != Failed || !errors.Is(byName["b"].Err, context.Canceled) {
		t.Errorf("the eviction not started should report the cancellation: %+v", byName["b"])
	}
}

func TestInterruptedEvictions(t *testing.T) {
	now := time.Date(2026, 12, 3, 15, 38, 0, 0, time.UTC)
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	budget := func(ns, name string, disrupted map[string]metav1.Time) policyv1.PodDisruptionBudget {
		return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptedPods: disrupted}}
	}
	// Pods that exist and are not terminating; the others are terminating or gone.
	runningPods := map[types.NamespacedName]bool{
		{Namespace: "a", Name: "cut-off"}: true, {Namespace: "a", Name: "just-evicted"}: true,
		{Namespace: "a", Name: "expired"}: true, {Namespace: "b", Name: "cut-off-too"}: true,
	}
	pdbs := []policyv1.PodDisruptionBudget{
		budget("b", "db", map[string]metav1.Time{"cut-off-too": ago(time.Minute)}),
		budget("a", "web", map[string]metav1.Time{
			"cut-off":      ago(30 * time.Second),
			"just-evicted": ago(2 * time.Second),  // the deletion is on its way
			"terminating":  ago(30 * time.Second), // deleted: nothing holds the budget but the controller's lag
			"gone":         ago(30 * time.Second),
			"expired":      ago(3 * time.Minute), // the disruption controller drops it
		}),
		budget("a", "empty", nil),
	}
	got := InterruptedEvictions(pdbs, func(p types.NamespacedName) bool { return runningPods[p] }, now)
	want := []InterruptedEviction{
		{Budget: types.NamespacedName{Namespace: "a", Name: "web"}, Pod: types.NamespacedName{Namespace: "a", Name: "cut-off"}, Since: now.Add(-30 * time.Second)},
		{Budget: types.NamespacedName{Namespace: "b", Name: "db"}, Pod: types.NamespacedName{Namespace: "b", Name: "cut-off-too"}, Since: now.Add(-time.Minute)},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Budget != want[i].Budget || got[i].Pod != want[i].Pod || !got[i].Since.Equal(want[i].Since) {
			t.Errorf("entry %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	msg := got[0].String()
	for _, part := range []string{"PodDisruptionBudget a/web", "pod a/cut-off", "2026-12-03T15:37:30Z", "not terminating", "until kube-controller-manager drops that entry at 2026-12-03T15:39:30Z"} {
		if !strings.Contains(msg, part) {
			t.Errorf("message %q does not say %q", msg, part)
		}
	}
}

// The operator's own pods leave last: they are pending from the start, but
// evictable only once no other pod is to evict or terminating.
