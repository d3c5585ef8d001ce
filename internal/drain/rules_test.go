package drain

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

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
			plan := mustPlan(t, []corev1.Pod{tt.pod}, Rules{CordonedAt: cordonedAt})
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
	plan := mustPlan(t, []corev1.Pod{pod("c"), pod("a"), pod("b", terminating), pod("d", ownedBy("DaemonSet", "apps/v1"))}, Rules{})
	if got := names(plan.ToEvict); fmt.Sprint(got) != "[a c]" {
		t.Fatalf("to evict %v", got)
	}
	if got := names(plan.Pending()); fmt.Sprint(got) != "[a c b]" {
		t.Fatalf("pending %v", got)
	}
}

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
	plan := mustPlan(t, []corev1.Pod{self, app}, Rules{EvictLast: own})
	if len(plan.Pending()) != 2 || len(plan.Evictable()) != 1 || plan.Evictable()[0].Name != "web" {
		t.Fatalf("with another pod to evict: pending %d, evictable %v", len(plan.Pending()), plan.Evictable())
	}
	now := metav1.Now()
	app.DeletionTimestamp = &now
	plan = mustPlan(t, []corev1.Pod{self, app}, Rules{EvictLast: own})
	if len(plan.Evictable()) != 0 {
		t.Fatalf("with another pod terminating: evictable %v, want none", plan.Evictable())
	}
	plan = mustPlan(t, []corev1.Pod{self}, Rules{EvictLast: own})
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
	pods := []corev1.Pod{
		pod("web"),
		pod("other", func(p *corev1.Pod) { p.Labels = map[string]string{"tier": "batch"} }),
		pod("cache", drainLabel(nmv1beta1.DrainLabelSkip)),
		pod("job", drainLabel(nmv1beta1.DrainLabelWaitCompleted)),
		pod("done", drainLabel(nmv1beta1.DrainLabelWaitCompleted), phase(corev1.PodSucceeded)),
		pod("quitting", drainLabel(nmv1beta1.DrainLabelWaitCompleted), terminating),
		pod("ds", ownedBy("DaemonSet", "apps/v1")),
		pod("self"),
	}
	policy := &nmv1beta1.DrainPolicy{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"batch"}}}}}
	plan := mustPlan(t, pods, Rules{Policy: policy, EvictLast: func(p *corev1.Pod) bool { return p.Name == "self" }})
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

// mustPlan is NewPlan for rules whose podSelector is valid.
func mustPlan(t *testing.T, pods []corev1.Pod, r Rules) Plan {
	t.Helper()
	plan, err := NewPlan(pods, r)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

func podNames(pods []corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// spec.drain.skipWaitForDeleteTimeout: on a node that is not Ready, a pod
// deleted longer ago than the timeout counts as gone (skipped); on a Ready
// node, or deleted more recently, it is still waited for.
func TestPlanSkipsPodsDeletedLongAgoOnADeadNode(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	deletedAgo := func(d time.Duration) podOpt {
		return func(p *corev1.Pod) { t := metav1.NewTime(now.Add(-d)); p.DeletionTimestamp = &t }
	}
	pods := []corev1.Pod{pod("old", deletedAgo(10*time.Minute)), pod("recent", deletedAgo(time.Minute)), pod("web")}
	node := func(ready corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
	}
	policy := &nmv1beta1.DrainPolicy{SkipWaitForDeleteTimeout: &metav1.Duration{Duration: 5 * time.Minute}}
	for _, tc := range []struct {
		name            string
		rules           Rules
		wantTerminating string
		wantSkipped     bool
	}{
		{"NotReady node", Rules{Policy: policy, Node: node(corev1.ConditionFalse), Now: now}, "recent", true},
		{"unreachable node", Rules{Policy: policy, Node: node(corev1.ConditionUnknown), Now: now}, "recent", true},
		{"Ready node", Rules{Policy: policy, Node: node(corev1.ConditionTrue), Now: now}, "old,recent", false},
		{"no timeout", Rules{Node: node(corev1.ConditionFalse), Now: now}, "old,recent", false},
		{"node unknown", Rules{Policy: policy, Now: now}, "old,recent", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := mustPlan(t, pods, tc.rules)
			if got := strings.Join(podNames(plan.Terminating), ","); got != tc.wantTerminating {
				t.Errorf("terminating %s, want %s", got, tc.wantTerminating)
			}
			reason, skipped := plan.Skipped[types.NamespacedName{Namespace: "ns", Name: "old"}]
			if skipped != tc.wantSkipped || skipped && reason != SkipDeletedOnDeadNode(5*time.Minute) {
				t.Errorf("old pod skipped %v (%q), want %v", skipped, reason, tc.wantSkipped)
			}
			if got := strings.Join(podNames(plan.ToEvict), ","); got != "web" {
				t.Errorf("to evict %s, want web", got)
			}
		})
	}
}

// An invalid podSelector is an error that names the field, not a plan.
func TestPlanRefusesAnInvalidPodSelector(t *testing.T) {
	bad := &nmv1beta1.DrainPolicy{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Like"}}}}
	if _, err := NewPlan([]corev1.Pod{pod("web")}, Rules{Policy: bad}); err == nil || !strings.Contains(err.Error(), "spec.drain.podSelector is not a valid label selector") {
		t.Errorf("got %v", err)
	}
}

// Grace is spec.drain.gracePeriodSeconds, nil without it.
func TestRulesGrace(t *testing.T) {
	if g := (Rules{}).Grace(); g != nil {
		t.Errorf("default grace %d, want nil", *g)
	}
	if g := (Rules{Policy: &nmv1beta1.DrainPolicy{GracePeriodSeconds: ptr.To[int64](3)}}).Grace(); g == nil || *g != 3 {
		t.Errorf("grace %v, want 3", g)
	}
}

// spec.drain.deleteEmptyDirData: left out or true, pods with emptyDir data
// are evicted (kubectl drain --delete-emptydir-data); false keeps running
// ones from eviction and the drain waits for them, saying why; a finished
// one holds no data that runs and is evicted.
func TestPlanDeleteEmptyDirData(t *testing.T) {
	pods := []corev1.Pod{pod("scratch", emptyDir), pod("scratch-done", emptyDir, phase(corev1.PodSucceeded)), pod("web")}
	for _, tc := range []struct {
		name                 string
		policy               *nmv1beta1.DrainPolicy
		wantEvict, wantLocal string
	}{
		{"left out", nil, "scratch,scratch-done,web", ""},
		{"true", &nmv1beta1.DrainPolicy{DeleteEmptyDirData: ptr.To(true)}, "scratch,scratch-done,web", ""},
		{"false", &nmv1beta1.DrainPolicy{DeleteEmptyDirData: ptr.To(false)}, "scratch-done,web", "scratch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := mustPlan(t, pods, Rules{Policy: tc.policy})
			if got := strings.Join(podNames(plan.ToEvict), ","); got != tc.wantEvict {
				t.Errorf("to evict %s, want %s", got, tc.wantEvict)
			}
			if got := strings.Join(podNames(plan.LocalData), ","); got != tc.wantLocal {
				t.Errorf("kept for their emptyDir data %s, want %s", got, tc.wantLocal)
			}
			round := NewRound(plan, nil)
			if tc.wantLocal == "" {
				return
			}
			if round.Done() || !strings.Contains(strings.Join(podNames(round.Pending), ","), "scratch") {
				t.Errorf("the drain does not wait for the kept pod: pending %v", podNames(round.Pending))
			}
			want := "pod ns/scratch has emptyDir data and spec.drain.deleteEmptyDirData is false: the drain does not evict it, " +
				"as kubectl drain without --delete-emptydir-data, and waits until it is gone. Delete it yourself"
			if !strings.HasPrefix(round.Message(), want) {
				t.Errorf("lastError %q, want it to start with %q", round.Message(), want)
			}
		})
	}
}
