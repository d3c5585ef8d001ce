package manager

import (
	"reflect"
	"runtime"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
)

// everyPolicyField is a spec.drain with every field set: the slim pods'
// plan must equal the full pods' plan under every rule a field turns on.
var everyPolicyField = &nmv1beta1.DrainPolicy{
	Timeout:   &metav1.Duration{Duration: time.Hour},
	OnTimeout: nmv1beta1.DrainTimeoutRestore,
	PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"frozen"}}}},
	GracePeriodSeconds:       ptr.To[int64](5),
	SkipWaitForDeleteTimeout: &metav1.Duration{Duration: time.Minute},
	AllowControlPlaneNode:    true,
	AllowLastSchedulableNode: true,
	DeleteEmptyDirData:       ptr.To(false),
}

// A new spec.drain field must be set in everyPolicyField, so that the test
// below runs the rule it brings.
func TestEveryPolicyFieldIsSet(t *testing.T) {
	v := reflect.ValueOf(*everyPolicyField)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("everyPolicyField leaves spec.drain.%s unset: set it, so that TestSlimPodKeepsWhatTheDrainReads runs its rule", v.Type().Field(i).Name)
		}
	}
}

// The drain plan of slimmed pods is the plan of the full pods, under every
// rule with every spec.drain field set, on a node that is not Ready: the
// cache's transform (drain.PodFields) never changes what a maintenance
// evicts, skips or waits for.
func TestSlimPodKeepsWhatTheDrainReads(t *testing.T) {
	cordoned := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	before, after := metav1.NewTime(cordoned.Add(-time.Hour)), metav1.NewTime(cordoned.Add(time.Minute))
	pods := slimFixture(before, after)
	var slim []corev1.Pod
	for i := range pods {
		out, err := SlimPod(&pods[i])
		if err != nil {
			t.Fatal(err)
		}
		s := *out.(*corev1.Pod)
		if len(s.Spec.Containers) != 0 || len(s.Spec.Volumes) != len(drain.EmptyDirVolumes(&pods[i])) || len(s.Status.Conditions) != 0 || len(s.ManagedFields) != 0 {
			t.Errorf("pod %s keeps what no drain reads: %+v", s.Name, s)
		}
		if s.Annotations["other"] != "" || len(s.Finalizers) != 0 || len(s.OwnerReferences) > 1 {
			t.Errorf("pod %s keeps annotations, finalizers or owners no drain reads: %+v", s.Name, s.ObjectMeta)
		}
		if pods[i].Annotations["other"] != "x" || len(pods[i].Labels) == 0 {
			t.Errorf("SlimPod changed the informer's object %s", pods[i].Name)
		}
		slim = append(slim, s)
	}
	notReady := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node02"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}}
	rules := drain.Rules{Policy: everyPolicyField, Node: notReady, CordonedAt: cordoned, Now: cordoned.Add(time.Hour),
		EvictLast: func(p *corev1.Pod) bool {
			return metav1.GetControllerOf(p) != nil && metav1.GetControllerOf(p).Name == "operator"
		}}
	want, err := drain.NewPlan(pods, rules)
	if err != nil {
		t.Fatal(err)
	}
	got, err := drain.NewPlan(slim, rules)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := planNames(got), planNames(want); !reflect.DeepEqual(g, w) {
		t.Errorf("plan of slim pods differs:\n got %v\nwant %v", g, w)
	}
	// The fixture covers every rule: each reason a pod stays, and each list.
	reasons := map[string]bool{}
	for _, r := range want.Skipped {
		reasons[r] = true
	}
	for _, r := range []string{drain.SkipDaemonSet, drain.SkipMirror, drain.SkipToleratesDrain, drain.SkipNotSelected, drain.SkipDrainLabel,
		drain.SkipCompleted, drain.SkipDeletedOnDeadNode(everyPolicyField.SkipWaitForDeleteTimeout.Duration)} {
		if !reasons[r] {
			t.Errorf("the fixture no longer has a pod that stays as %q", r)
		}
	}
	if len(want.ToEvict) == 0 || len(want.Terminating) == 0 || len(want.WaitCompleted) == 0 || len(want.Last) == 0 || len(want.LocalData) == 0 {
		t.Errorf("the fixture no longer covers every list: %v", planNames(want))
	}
	if out, _ := SlimPod(&corev1.Node{}); !reflect.DeepEqual(out, &corev1.Node{}) {
		t.Errorf("a non-pod must pass through unchanged, got %+v", out)
	}
}

// slimFixture is a pod of every kind the drain's rules tell apart, each with
// what the cache drops (containers, volumes other than emptyDir, conditions, other annotations,
// owners, finalizers, managed fields).
func slimFixture(before, after metav1.Time) []corev1.Pod {
	full := func(name string, mutate func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: before,
				Labels:        map[string]string{"app": name},
				Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"big":"manifest"}`, "other": "x"},
				Finalizers:    []string{"example.com/keep"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
			Spec: corev1.PodSpec{NodeName: "node02", Containers: []corev1.Container{{Name: "app", Image: "pause"}},
				Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}},
		}
		mutate(&p)
		return p
	}
	controller := func(kind, name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Tracker", Name: "t"},
			{APIVersion: "apps/v1", Kind: kind, Name: name, Controller: ptr.To(true)}}
	}
	label := func(k, v string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Labels[k] = v } }
	deletedAt := func(t metav1.Time) func(*corev1.Pod) { return func(p *corev1.Pod) { p.DeletionTimestamp = &t } }
	tolerateAll := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	return []corev1.Pod{
		full("web", func(p *corev1.Pod) { p.OwnerReferences = controller("ReplicaSet", "web") }),
		full("operator", func(p *corev1.Pod) { p.OwnerReferences = controller("ReplicaSet", "operator") }),
		full("agent", func(p *corev1.Pod) { p.OwnerReferences = controller("DaemonSet", "agent") }),
		full("agent-done", func(p *corev1.Pod) {
			p.OwnerReferences = controller("DaemonSet", "agent")
			p.Status.Phase = corev1.PodSucceeded
		}),
		full("static", func(p *corev1.Pod) { p.Annotations[corev1.MirrorPodAnnotationKey] = "x" }),
		full("late-tolerant", func(p *corev1.Pod) { p.CreationTimestamp = after; p.Spec.Tolerations = tolerateAll }),
		full("early-tolerant", func(p *corev1.Pod) { p.Spec.Tolerations = tolerateAll }),
		full("late-plain", func(p *corev1.Pod) { p.CreationTimestamp = after }),
		full("leaving", deletedAt(metav1.NewTime(after.Add(59*time.Minute)))),
		full("left-long-ago", deletedAt(after)),
		full("bare", func(*corev1.Pod) {}),
		full("scratch", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}),
		full("frozen", label("tier", "frozen")),
		full("cache", label(nmv1beta1.DrainLabel, nmv1beta1.DrainLabelSkip)),
		full("job", label(nmv1beta1.DrainLabel, nmv1beta1.DrainLabelWaitCompleted)),
		full("job-done", func(p *corev1.Pod) {
			p.Labels[nmv1beta1.DrainLabel] = nmv1beta1.DrainLabelWaitCompleted
			p.Status.Phase = corev1.PodFailed
		}),
		full("other-daemon", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "DaemonSet", Name: "d", Controller: ptr.To(true)}}
		}),
	}
}

// planNames is a plan by pod name: each list, and the reason of each pod
// that stays.
func planNames(p drain.Plan) map[string][]string {
	names := func(ps []corev1.Pod) (n []string) {
		for _, p := range ps {
			n = append(n, p.Name)
		}
		return n
	}
	out := map[string][]string{"evict": names(p.ToEvict), "last": names(p.Last), "terminating": names(p.Terminating),
		"waitCompleted": names(p.WaitCompleted), "localData": names(p.LocalData)}
	for pod, reason := range p.Skipped {
		out["skip "+pod.Name] = []string{reason}
	}
	return out
}

// Pods with the same namespace, node and tolerations share one copy of them;
// a pod with other tolerations gets its own, equal to what it had.
func TestSlimPodSharesWhatPodsHaveInCommon(t *testing.T) {
	admitted := func() []corev1.Toleration {
		return []corev1.Toleration{
			{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
			{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)},
		}
	}
	pod := func(name string, ts []corev1.Toleration) *corev1.Pod {
		out, err := SlimPod(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: string([]byte("shop")), Name: name},
			Spec:       corev1.PodSpec{NodeName: string([]byte("node07")), Tolerations: ts},
		})
		if err != nil {
			t.Fatal(err)
		}
		return out.(*corev1.Pod)
	}
	a := pod("a", admitted())
	runtime.GC() // a copy shared only while something else holds it is not shared
	b := pod("b", admitted())
	longer := append(admitted(), corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists})
	c := pod("c", longer)
	if unsafe.StringData(a.Namespace) != unsafe.StringData(b.Namespace) || unsafe.StringData(a.Spec.NodeName) != unsafe.StringData(b.Spec.NodeName) {
		t.Error("two pods of one namespace and node do not share the strings")
	}
	if &a.Spec.Tolerations[0] != &b.Spec.Tolerations[0] {
		t.Error("two pods with the admission's default tolerations do not share them")
	}
	if !reflect.DeepEqual(a.Spec.Tolerations, admitted()) || !reflect.DeepEqual(c.Spec.Tolerations, longer) {
		t.Errorf("tolerations changed: %+v, %+v", a.Spec.Tolerations, c.Spec.Tolerations)
	}
	if &c.Spec.Tolerations[0] == &a.Spec.Tolerations[0] {
		t.Error("a pod with other tolerations shares the default ones")
	}
}
