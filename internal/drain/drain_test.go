package drain

import (
	"context"
	"errors"
	"fmt"
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
	"k8s.io/utils/ptr"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

var taints = []corev1.Taint{
	{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
	{Key: "medik8s.io/drain", Effect: corev1.TaintEffectNoSchedule},
}

type podOpt func(*corev1.Pod)

func pod(name string, opts ...podOpt) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name),
		CreationTimestamp: metav1.NewTime(time.Unix(1000, 0))}}
	p.Status.Phase = corev1.PodRunning
	for _, o := range opts {
		o(&p)
	}
	return p
}

func ownedBy(kind, apiVersion string) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, APIVersion: apiVersion, Name: "owner", Controller: ptrTrue()}}
	}
}
func ptrTrue() *bool { b := true; return &b }
func terminating(p *corev1.Pod) {
	t := metav1.Now()
	p.DeletionTimestamp = &t
}
func mirror(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }
func createdAt(sec int64) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(time.Unix(sec, 0)) }
}
func toleratesAll(p *corev1.Pod) {
	p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
}
func toleratesUnschedulableOnly(p *corev1.Pod) {
	p.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists}}
}
func phase(ph corev1.PodPhase) podOpt { return func(p *corev1.Pod) { p.Status.Phase = ph } }
func emptyDir(p *corev1.Pod) {
	p.Spec.Volumes = []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
}

func names(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestPlanClassifiesPods(t *testing.T) {
	cordonedAt := time.Unix(2000, 0)
	tests := []struct {
		name        string
		pod         corev1.Pod
		wantOutcome string // evict, terminating or the skip reason
	}{
		{"replicaset pod", pod("rs", ownedBy("ReplicaSet", "apps/v1")), "evict"},
		{"bare pod", pod("bare"), "evict"},
		{"emptyDir pod", pod("scratch", emptyDir), "evict"},
		{"finished pod", pod("done", phase(corev1.PodSucceeded)), "evict"},
		{"daemonset pod", pod("ds", ownedBy("DaemonSet", "apps/v1")), SkipDaemonSet},
		{"finished daemonset pod", pod("ds-done", ownedBy("DaemonSet", "apps/v1"), phase(corev1.PodFailed)), "evict"},
		{"mirror pod", pod("static", mirror), SkipMirror},
		{"terminating pod", pod("going", terminating), "terminating"},
		{"tolerant pod from before the cordon", pod("old-tolerant", toleratesAll, createdAt(1500)), "evict"},
		{"tolerant pod created after the cordon", pod("new-tolerant", toleratesAll, createdAt(2500)), SkipToleratesDrain},
		{"pod tolerating only the cordon, created after", pod("half", toleratesUnschedulableOnly, createdAt(2500)), "evict"},
		{"intolerant pod created after the cordon", pod("late", createdAt(2500)), "evict"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := NewPlan([]corev1.Pod{tt.pod}, Filters(cordonedAt, taints, nil))
			got := ""
			switch {
			case len(plan.ToEvict) == 1:
				got = "evict"
			case len(plan.Terminating) == 1:
				got = "terminating"
			default:
				got = plan.Skipped[types.NamespacedName{Namespace: "ns", Name: tt.pod.Name}]
			}
			if got != tt.wantOutcome {
				t.Fatalf("got %q, want %q", got, tt.wantOutcome)
			}
		})
	}
}

func TestPlanIsSortedAndPendingIncludesTerminating(t *testing.T) {
	plan := NewPlan([]corev1.Pod{pod("c"), pod("a"), pod("b", terminating), pod("d", ownedBy("DaemonSet", "apps/v1"))}, Filters(time.Time{}, taints, nil))
	if got := names(plan.ToEvict); fmt.Sprint(got) != "[a c]" {
		t.Fatalf("to evict %v", got)
	}
	if got := names(plan.Pending()); fmt.Sprint(got) != "[a c b]" {
		t.Fatalf("pending %v", got)
	}
}

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
func TestEvictLast(t *testing.T) {
	rs := func(name string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name, Controller: ptr.To(true)}}
		}
	}
	own := OwnedByDeployment("ops", "node-maintenance-operator")
	mk := func(ns, name string, opts ...func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		for _, o := range opts {
			o(&p)
		}
		return p
	}
	self := mk("ops", "node-maintenance-operator-5d8f7-x", rs("node-maintenance-operator-5d8f7"))
	for _, p := range []corev1.Pod{
		mk("other", "node-maintenance-operator-5d8f7-x", rs("node-maintenance-operator-5d8f7")),
		mk("ops", "node-maintenance-operator-extra-5d8f7-x", rs("node-maintenance-operator-extra-5d8f7")),
		mk("ops", "bare"),
	} {
		if own(&p) {
			t.Fatalf("%s/%s counted as the operator's own pod", p.Namespace, p.Name)
		}
	}
	if !own(&self) {
		t.Fatalf("the operator's pod is not recognised")
	}
	app := mk("shop", "web")
	plan := NewPlan([]corev1.Pod{self, app}, nil).EvictLast(own)
	if len(plan.Pending()) != 2 || len(plan.Evictable()) != 1 || plan.Evictable()[0].Name != "web" {
		t.Fatalf("with another pod to evict: pending %d, evictable %v", len(plan.Pending()), plan.Evictable())
	}
	now := metav1.Now()
	app.DeletionTimestamp = &now
	plan = NewPlan([]corev1.Pod{self, app}, nil).EvictLast(own)
	if len(plan.Evictable()) != 0 {
		t.Fatalf("with another pod terminating: evictable %v, want none", plan.Evictable())
	}
	plan = NewPlan([]corev1.Pod{self}, nil).EvictLast(own)
	if len(plan.Evictable()) != 1 || plan.Evictable()[0].Name != self.Name {
		t.Fatalf("alone on the node: evictable %v, want the operator's pod", plan.Evictable())
	}
}

func drainLabel(v string) podOpt {
	return func(p *corev1.Pod) { p.Labels = map[string]string{nmv1beta1.DrainLabel: v} }
}

// spec.drain.podSelector and Cluster API's drain label: what stays, what is
// evicted, what is waited for, and that the operator's own pods wait for
// the waited-for ones.
func TestPlanSelectorAndDrainLabel(t *testing.T) {
	selected := func(p *corev1.Pod) bool { return p.Name != "other" }
	pods := []corev1.Pod{
		pod("web"),
		pod("other"),
		pod("cache", drainLabel(nmv1beta1.DrainLabelSkip)),
		pod("job", drainLabel(nmv1beta1.DrainLabelWaitCompleted)),
		pod("done", drainLabel(nmv1beta1.DrainLabelWaitCompleted), phase(corev1.PodSucceeded)),
		pod("quitting", drainLabel(nmv1beta1.DrainLabelWaitCompleted), terminating),
		pod("ds", ownedBy("DaemonSet", "apps/v1")),
		pod("self"),
	}
	plan := NewPlan(pods, Filters(time.Time{}, taints, selected)).EvictLast(func(p *corev1.Pod) bool { return p.Name == "self" })
	names := func(pods []corev1.Pod) string { return strings.Join(podNames(pods), ",") }
	if got := names(plan.ToEvict); got != "web" {
		t.Errorf("ToEvict %s, want web", got)
	}
	if got := names(plan.WaitCompleted); got != "job" {
		t.Errorf("WaitCompleted %s, want job", got)
	}
	if got := names(plan.Terminating); got != "quitting" {
		t.Errorf("Terminating %s, want quitting", got)
	}
	want := map[string]string{"other": SkipNotSelected, "cache": SkipDrainLabel, "done": SkipCompleted, "ds": SkipDaemonSet}
	if len(plan.Skipped) != len(want) {
		t.Errorf("Skipped %v, want %v", plan.Skipped, want)
	}
	for name, reason := range want {
		if got := plan.Skipped[types.NamespacedName{Namespace: "ns", Name: name}]; got != reason {
			t.Errorf("pod %s skipped as %q, want %q", name, got, reason)
		}
	}
	if got := names(plan.Pending()); got != "web,self,quitting,job" {
		t.Errorf("Pending %s, want web,self,quitting,job", got)
	}
	// Once only the waited-for pod is left, the operator's pod still waits.
	plan.ToEvict, plan.Terminating = nil, nil
	if got := names(plan.Evictable()); got != "" {
		t.Errorf("Evictable %s while a wait-completed pod runs, want none", got)
	}
	plan.WaitCompleted = nil
	if got := names(plan.Evictable()); got != "self" {
		t.Errorf("Evictable %s once nothing else is left, want self", got)
	}
}

func podNames(pods []corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}
