// Package nodestate records what a maintenance changes on a Node (the
// cordon, the maintenance taints, the exclude-from-remediation label, the
// KEP-5683 lifecycle conditions: conditions.go) and computes how to put it
// back exactly as it was. It is pure logic: callers read and patch the Node. The operator and the drain preview (package drain) share
// its taints.
package nodestate

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

const (
	// PriorStateAnnotation on a NodeMaintenance holds the Node's state from
	// before the maintenance touched it. Its presence means "the node carries
	// our changes"; it is removed once the node has been restored.
	PriorStateAnnotation = "nodemaintenance.medik8s.io/prior-node-state"

	// DrainTaintKey is the medik8s drain taint.
	DrainTaintKey = "medik8s.io/drain"
	// ExcludeFromRemediationLabel keeps remediation operators away from a node
	// that is in maintenance on purpose.
	ExcludeFromRemediationLabel = "remediation.medik8s.io/exclude-from-remediation"
)

// MaintenanceTaints are added while the node is in maintenance.
var MaintenanceTaints = []corev1.Taint{
	{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
	{Key: DrainTaintKey, Effect: corev1.TaintEffectNoSchedule},
}

// Prior is what the node looked like before the maintenance changed it.
type Prior struct {
	// Unschedulable is the node's spec.unschedulable (cordoned before).
	Unschedulable bool `json:"unschedulable"`
	// PresentTaints are the maintenance taints the node already had; only the
	// others are removed on restore.
	PresentTaints []corev1.Taint `json:"presentTaints,omitempty"`
	// ExcludeLabel is the prior value of the exclude-from-remediation label,
	// nil when the node did not have it.
	ExcludeLabel *string `json:"excludeLabel,omitempty"`
	// CordonedAt is when the maintenance cordoned the node. Pods created later
	// that tolerate the maintenance taints chose to run there, and are left alone.
	CordonedAt time.Time `json:"cordonedAt"`
	// Conditions are the node's lifecycle conditions of the maintenance's
	// types (MaintenanceConditionTypes) that someone else wrote before the
	// maintenance, exactly as they were: the restore puts them back. A
	// record written before conditions were recorded has none, and reads
	// the same (RestoreConditions then only removes the operator's own).
	Conditions []corev1.NodeCondition `json:"conditions,omitempty"`
	// Adopted says the maintenance was started by another medik8s-compatible
	// operator and taken over (AdoptedPrior): the node's state from before
	// it was never recorded, and the restore is that operator's own:
	// uncordoned, the maintenance taints and the exclude-from-remediation
	// label removed.
	Adopted bool `json:"adopted,omitempty"`
	// Pods are the node's pods as the maintenance's status counts them
	// (totalpods, evictionPods), taken when the record is written. They are
	// not the node's state and nothing restores them: the record is the one
	// write made before the first eviction, so a pass that evicts pods and
	// dies before its status write cannot make a later pass count only the
	// pods left. Nil in a record written before they were kept, and in an
	// adopted one.
	Pods *PodCounts `json:"pods,omitempty"`
}

// PodCounts are a node's pods when its maintenance began.
type PodCounts struct {
	// Total is every pod on the node.
	Total int `json:"total"`
	// ToEvict are those the drain's rules evict.
	ToEvict int `json:"toEvict"`
}

// Record captures the node's state before the maintenance touches it.
func Record(node *corev1.Node, now time.Time) Prior {
	p := Prior{Unschedulable: node.Spec.Unschedulable, CordonedAt: now.UTC().Truncate(time.Second)}
	for _, mt := range MaintenanceTaints {
		if hasTaint(node.Spec.Taints, mt) {
			p.PresentTaints = append(p.PresentTaints, mt)
		}
	}
	if v, ok := node.Labels[ExcludeFromRemediationLabel]; ok {
		p.ExcludeLabel = &v
	}
	p.Conditions = recordConditions(node)
	return p
}

// Encode serialises p for the annotation.
func (p Prior) Encode() string {
	b, _ := json.Marshal(p) // a struct of plain fields always marshals
	return string(b)
}

// Decode reads the annotation value.
func Decode(s string) (Prior, error) {
	var p Prior
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return Prior{}, fmt.Errorf("the %s annotation is not valid: %w", PriorStateAnnotation, err)
	}
	return p, nil
}

// ApplyMaintenance changes node in place into its maintenance state: cordoned,
// maintenance taints, exclude-from-remediation label. Other taints and labels
// are kept. It reports whether anything changed.
func ApplyMaintenance(node *corev1.Node) bool {
	changed := false
	if !node.Spec.Unschedulable {
		node.Spec.Unschedulable = true
		changed = true
	}
	for _, mt := range MaintenanceTaints {
		if !hasTaint(node.Spec.Taints, mt) {
			node.Spec.Taints = append(node.Spec.Taints, mt)
			changed = true
		}
	}
	if node.Labels[ExcludeFromRemediationLabel] != "true" {
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[ExcludeFromRemediationLabel] = "true"
		changed = true
	}
	return changed
}

// Restore changes node in place back to prior: schedulability as before,
// maintenance taints that were not there before removed, the label as before.
// Taints and labels the maintenance does not own are left untouched. It
// reports whether anything changed.
func Restore(node *corev1.Node, prior Prior) bool {
	changed := false
	if node.Spec.Unschedulable != prior.Unschedulable {
		node.Spec.Unschedulable = prior.Unschedulable
		changed = true
	}
	kept := node.Spec.Taints[:0:0]
	for _, t := range node.Spec.Taints {
		if isMaintenanceTaint(t) && !hasTaint(prior.PresentTaints, t) && !(prior.Unschedulable && t.Key == corev1.TaintNodeUnschedulable) {
			changed = true
			continue
		}
		kept = append(kept, t)
	}
	node.Spec.Taints = kept
	current, has := node.Labels[ExcludeFromRemediationLabel]
	switch {
	case prior.ExcludeLabel == nil && has:
		delete(node.Labels, ExcludeFromRemediationLabel)
		changed = true
	case prior.ExcludeLabel != nil && (!has || current != *prior.ExcludeLabel):
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[ExcludeFromRemediationLabel] = *prior.ExcludeLabel
		changed = true
	}
	return changed
}

// InMaintenance reports whether node carries the full maintenance state.
func InMaintenance(node *corev1.Node) bool {
	probe := node.DeepCopy()
	return !ApplyMaintenance(probe)
}

func isMaintenanceTaint(t corev1.Taint) bool {
	return hasTaint(MaintenanceTaints, t)
}

// hasTaint matches on key and effect, as the API server does for uniqueness.
func hasTaint(taints []corev1.Taint, want corev1.Taint) bool {
	for _, t := range taints {
		if t.Key == want.Key && t.Effect == want.Effect {
			return true
		}
	}
	return false
}
