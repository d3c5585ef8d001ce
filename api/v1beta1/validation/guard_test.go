package validation

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

func guardNode(name string, change func(*corev1.Node)) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	if change != nil {
		change(&n)
	}
	return n
}

func TestValidateNodeGuards(t *testing.T) {
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	notReady := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown }
	noSchedule := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	}
	preferNoSchedule := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}}
	}
	controlPlane := func(n *corev1.Node) { n.Labels[ControlPlaneLabel] = "" }
	master := func(n *corev1.Node) { n.Labels["node-role.kubernetes.io/master"] = "" }
	target := guardNode("node01", nil)

	for _, tc := range []struct {
		name   string
		node   corev1.Node
		others []corev1.Node
		drain  *v1beta1.DrainPolicy
		want   string // a part of the error; empty: admitted
	}{
		{name: "another schedulable node", node: target, others: []corev1.Node{guardNode("node02", nil)}},
		{name: "a PreferNoSchedule taint still takes pods", node: target, others: []corev1.Node{guardNode("node02", preferNoSchedule)}},
		{name: "only node", node: target, want: `node "node01" is the last schedulable node of the cluster (it is the only node)`},
		{name: "others cordoned, not Ready or tainted", node: target,
			others: []corev1.Node{guardNode("node02", cordoned), guardNode("node03", notReady), guardNode("node04", noSchedule)},
			want:   "no other node takes pods: node02 (cordoned), node03 (not Ready), node04 (tainted dedicated:NoSchedule)"},
		{name: "many others named up to five", node: target, others: []corev1.Node{
			guardNode("n1", cordoned), guardNode("n2", cordoned), guardNode("n3", cordoned), guardNode("n4", cordoned),
			guardNode("n5", cordoned), guardNode("n6", cordoned), guardNode("n7", cordoned)},
			want: "n5 (cordoned) and 2 more"},
		{name: "last node allowed", node: target, drain: &v1beta1.DrainPolicy{AllowLastSchedulableNode: true}},
		{name: "the node itself in the list does not count", node: target, others: []corev1.Node{target}, want: "it is the only node"},
		{name: "control plane", node: guardNode("cp1", controlPlane), others: []corev1.Node{guardNode("node02", nil)},
			want: `node "cp1" is a control-plane node (labelled node-role.kubernetes.io/control-plane): its maintenance is refused unless spec.drain.allowControlPlaneNode is true`},
		{name: "legacy master label", node: guardNode("m1", master), others: []corev1.Node{guardNode("node02", nil)}, want: "is a control-plane node"},
		{name: "control plane allowed", node: guardNode("cp1", controlPlane), others: []corev1.Node{guardNode("node02", nil)},
			drain: &v1beta1.DrainPolicy{AllowControlPlaneNode: true}},
		{name: "control plane allowed is not the last node allowed", node: guardNode("cp1", controlPlane),
			drain: &v1beta1.DrainPolicy{AllowControlPlaneNode: true}, want: "allowLastSchedulableNode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateNodeGuards(&tc.node, tc.others, tc.drain)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("admitted, want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}
