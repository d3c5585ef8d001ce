package manager

import (
	"reflect"
	"runtime"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
)

// The drain plan of slimmed pods is the plan of the full pods: the cache's
// transform never changes what a maintenance evicts, skips or waits for.
func TestSlimPodKeepsWhatTheDrainReads(t *testing.T) {
	cordoned := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	before, after := metav1.NewTime(cordoned.Add(-time.Hour)), metav1.NewTime(cordoned.Add(time.Minute))
	full := func(name string, mutate func(*corev1.Pod)) corev1.Pod {
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: "uid-" + "name", CreationTimestamp: before,
				Labels:        map[string]string{"app": name},
				Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"big":"manifest"}`, "other": "x"},
				Finalizers:    []string{"example.com/keep"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
			Spec: corev1.PodSpec{NodeName: "node02", Containers: []corev1.Container{{Name: "app", Image: "pause"}},
				Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}},
		}
		mutate(&p)
		return p
	}
	controller := func(kind string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Tracker", Name: "t"},
			{APIVersion: "apps/v1", Kind: kind, Name: "x", Controller: ptr.To(true)}}
	}
	tolerateAll := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	pods := []corev1.Pod{
		full("web", func(p *corev1.Pod) { p.OwnerReferences = controller("ReplicaSet") }),
		full("agent", func(p *corev1.Pod) { p.OwnerReferences = controller("DaemonSet") }),
		full("agent-done", func(p *corev1.Pod) { p.OwnerReferences = controller("DaemonSet"); p.Status.Phase = corev1.PodSucceeded }),
		full("static", func(p *corev1.Pod) { p.Annotations[corev1.MirrorPodAnnotationKey] = "x" }),
		full("late-tolerant", func(p *corev1.Pod) { p.CreationTimestamp = after; p.Spec.Tolerations = tolerateAll }),
		full("early-tolerant", func(p *corev1.Pod) { p.Spec.Tolerations = tolerateAll }),
		full("late-plain", func(p *corev1.Pod) { p.CreationTimestamp = after }),
		full("leaving", func(p *corev1.Pod) { p.DeletionTimestamp = &after }),
		full("bare", func(*corev1.Pod) {}),
		full("other-daemon", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "DaemonSet", Name: "d", Controller: ptr.To(true)}}
		}),
	}
	var slim []corev1.Pod
	for i := range pods {
		out, err := SlimPod(&pods[i])
		if err != nil {
			t.Fatal(err)
		}
		s := *out.(*corev1.Pod)
		if len(s.Spec.Containers) != 0 || len(s.Spec.Volumes) != 0 || len(s.Status.Conditions) != 0 || len(s.ManagedFields) != 0 {
			t.Errorf("pod %s keeps what no drain reads: %+v", s.Name, s)
		}
		if len(s.Labels) != 0 || s.Annotations["other"] != "" || len(s.Finalizers) != 0 {
			t.Errorf("pod %s keeps labels, annotations or finalizers no drain reads: %+v", s.Name, s.ObjectMeta)
		}
		if pods[i].Annotations["other"] != "x" || len(pods[i].Labels) == 0 {
			t.Errorf("SlimPod changed the informer's object %s", pods[i].Name)
		}
		slim = append(slim, s)
	}
	filters := drain.Filters(cordoned, nodestate.MaintenanceTaints, nil)
	want, got := drain.NewPlan(pods, filters), drain.NewPlan(slim, filters)
	names := func(ps []corev1.Pod) (n []string) {
		for _, p := range ps {
			n = append(n, p.Name)
		}
		return n
	}
	if !reflect.DeepEqual(names(got.ToEvict), names(want.ToEvict)) || !reflect.DeepEqual(names(got.Terminating), names(want.Terminating)) ||
		!reflect.DeepEqual(got.Skipped, want.Skipped) {
		t.Errorf("plan of slim pods differs:\n got evict %v terminating %v skipped %v\nwant evict %v terminating %v skipped %v",
			names(got.ToEvict), names(got.Terminating), got.Skipped, names(want.ToEvict), names(want.Terminating), want.Skipped)
	}
	if len(want.Skipped) != 3 || len(want.Terminating) != 1 {
		t.Fatalf("the fixture no longer covers skipped and terminating pods: %+v", want)
	}

	if out, _ := SlimPod(&corev1.Node{}); !reflect.DeepEqual(out, &corev1.Node{}) {
		t.Errorf("a non-pod must pass through unchanged, got %+v", out)
	}
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
