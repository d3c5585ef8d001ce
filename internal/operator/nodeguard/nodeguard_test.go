package nodeguard

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(mutate func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node01"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	mutate(n)
	return n
}

// The index holds the nodes the guard counts as taking pods, and no other.
func TestSchedulable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.Node)
		want   bool
	}{
		{"ready", func(*corev1.Node) {}, true},
		{"cordoned", func(n *corev1.Node) { n.Spec.Unschedulable = true }, false},
		{"not ready", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown }, false},
		{"NoSchedule taint", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
		}, false},
		{"NoExecute taint", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoExecute}}
		}, false},
		{"PreferNoSchedule taint", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectPreferNoSchedule}}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Schedulable(node(tc.mutate))
			if want := tc.want; (len(got) == 1 && got[0] == "true") != want || (!want && len(got) != 0) {
				t.Errorf("Schedulable = %v, want schedulable %v", got, want)
			}
		})
	}
}
