package validation

import (
	"errors"
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
			listed := false
			err := ValidateNodeGuards(&tc.node, tc.drain, func() ([]corev1.Node, error) { listed = true; return tc.others, nil })
			if listed && (IsControlPlane(&tc.node) && (tc.drain == nil || !tc.drain.AllowControlPlaneNode) || tc.drain != nil && tc.drain.AllowLastSchedulableNode) {
				t.Error("listed the nodes although the last schedulable node is not checked")
			}
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

// Without the nodes (nil), only the control-plane guard applies; a list that
// fails is an error that says which check it was for.
func TestValidateNodeGuardsWithoutTheNodes(t *testing.T) {
	if err := ValidateNodeGuards(ptrTo(guardNode("node01", nil)), nil, nil); err != nil {
		t.Errorf("the only node, nodes unknown: %v", err)
	}
	cp := guardNode("cp1", func(n *corev1.Node) { n.Labels[ControlPlaneLabel] = "" })
	if err := ValidateNodeGuards(&cp, nil, nil); err == nil {
		t.Error("a control-plane node was admitted when the nodes are not known")
	}
	err := ValidateNodeGuards(ptrTo(guardNode("node01", nil)), nil, func() ([]corev1.Node, error) { return nil, errors.New("forbidden") })
	if err == nil || !strings.Contains(err.Error(), `cannot list the nodes to check that node "node01" is not the last schedulable one: forbidden`) {
		t.Errorf("a failed list: %v", err)
	}
}

func ptrTo[T any](v T) *T { return &v }
