package validation

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// Node role labels of a control-plane node: the current one, and the one
// clusters made before Kubernetes 1.24 may still carry.
const (
	ControlPlaneLabel       = "node-role.kubernetes.io/control-plane"
	legacyControlPlaneLabel = "node-role.kubernetes.io/master"
)

// IsControlPlane reports whether node carries a control-plane role label.
func IsControlPlane(node *corev1.Node) bool {
	_, cp := node.Labels[ControlPlaneLabel]
	_, legacy := node.Labels[legacyControlPlaneLabel]
	return cp || legacy
}

// NodeReady reports whether node's Ready condition is True: its kubelet
// reports and runs pods. A node without the condition is not Ready.
func NodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Unschedulable says why pods without special tolerations cannot be
// scheduled on node: it is cordoned, not Ready, or tainted NoSchedule or
// NoExecute. It is empty for a schedulable node.
func Unschedulable(node *corev1.Node) string {
	if node.Spec.Unschedulable {
		return "cordoned"
	}
	if !NodeReady(node) {
		return "not Ready"
	}
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return fmt.Sprintf("tainted %s:%s", t.Key, t.Effect)
		}
	}
	return ""
}

// ValidateNodeGuards refuses the maintenance of a control-plane node and of
// the last schedulable node of the cluster unless the drain policy allows it
// (ValidateControlPlane, ValidateLastSchedulable). The webhook applies it
// when a NodeMaintenance is created, the operator again before it cordons,
// and the preview reports what it would refuse.
//
// nodes lists every node of the cluster; it is called only when the last
// schedulable node is checked (a control-plane node refused first, or
// spec.drain.allowLastSchedulableNode, need no list). A nil nodes says they
// are not known, and only the control-plane guard applies.
func ValidateNodeGuards(node *corev1.Node, d *v1beta1.DrainPolicy, nodes func() ([]corev1.Node, error)) error {
	if err := ValidateControlPlane(node, d); err != nil {
		return err
	}
	if nodes == nil || (d != nil && d.AllowLastSchedulableNode) {
		return nil
	}
	all, err := nodes()
	if err != nil {
		return fmt.Errorf("cannot list the nodes to check that node %q is not the last schedulable one: %w", node.Name, err)
	}
	return ValidateLastSchedulable(node, all, d)
}

// ValidateControlPlane refuses a control-plane node unless
// spec.drain.allowControlPlaneNode is true.
func ValidateControlPlane(node *corev1.Node, d *v1beta1.DrainPolicy) error {
	if IsControlPlane(node) && (d == nil || !d.AllowControlPlaneNode) {
		return fmt.Errorf("node %q is a control-plane node (labelled %s): its maintenance is refused unless spec.drain.allowControlPlaneNode is true, "+
			"because draining it takes a member of the control plane away. Set it if that is what you want", node.Name, ControlPlaneLabel)
	}
	return nil
}

// ValidateLastSchedulable refuses node when no other node of nodes (every
// node of the cluster, node among them or not) is schedulable, unless
// spec.drain.allowLastSchedulableNode is true.
func ValidateLastSchedulable(node *corev1.Node, nodes []corev1.Node, d *v1beta1.DrainPolicy) error {
	if d != nil && d.AllowLastSchedulableNode {
		return nil
	}
	var others []string
	for i := range nodes {
		if nodes[i].Name == node.Name {
			continue
		}
		why := Unschedulable(&nodes[i])
		if why == "" {
			return nil
		}
		others = append(others, nodes[i].Name+" ("+why+")")
	}
	sort.Strings(others)
	detail := "it is the only node"
	if len(others) > 0 {
		const maxNamed = 5
		detail = "no other node takes pods: " + strings.Join(others[:min(len(others), maxNamed)], ", ")
		if len(others) > maxNamed {
			detail += fmt.Sprintf(" and %d more", len(others)-maxNamed)
		}
	}
	return fmt.Errorf("node %q is the last schedulable node of the cluster (%s): its maintenance is refused unless spec.drain.allowLastSchedulableNode is true, "+
		"because the evicted pods would have nowhere to go. Make another node schedulable first, or set it if that is what you want", node.Name, detail)
}
