package manager

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/operator/drain"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/operator/nodestate"
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
				Annotations:   map[string]string{lastAppliedAnnotation: `{"big":"manifest"}`, "keep": "me"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
			Spec: corev1.PodSpec{NodeName: "node02", Containers: []corev1.Container{{Name: "app", Image: "pause"}},
				Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}},
		}
		mutate(&p)
		return p
	}
	controller := func(kind string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: "x", Controller: ptr.To(true)}}
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
		if _, ok := s.Annotations[lastAppliedAnnotation]; ok || s.Annotations["keep"] != "me" {
			t.Errorf("pod %s annotations %v: want last-applied dropped, the rest kept", s.Name, s.Annotations)
		}
		if _, ok := pods[i].Annotations[lastAppliedAnnotation]; !ok {
			t.Errorf("SlimPod changed the informer's object %s", pods[i].Name)
		}
		slim = append(slim, s)
	}
	filters := drain.Filters(cordoned, nodestate.MaintenanceTaints)
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
