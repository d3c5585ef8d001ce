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

// Unschedulable says why pods without special tolerations cannot be
// scheduled on node: it is cordoned, not Ready, or tainted NoSchedule or
// NoExecute. It is empty for a schedulable node.
func Unschedulable(node *corev1.Node) string {
	if node.Spec.Unschedulable {
		return "cordoned"
	}
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
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
// when a NodeMaintenance is created, the operator again before it cordons.
func ValidateNodeGuards(node *corev1.Node, nodes []corev1.Node, d *v1beta1.DrainPolicy) error {
	if err := ValidateControlPlane(node, d); err != nil {
		return err
	}
	return ValidateLastSchedulable(node, nodes, d)
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
