package nodestate

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// HasDrainTaint reports whether node carries the medik8s drain taint
// (medik8s.io/drain:NoSchedule): the mark that a medik8s-compatible
// maintenance operator, this one or another, has the node in maintenance.
func HasDrainTaint(node *corev1.Node) bool {
	return hasTaint(node.Spec.Taints, corev1.Taint{Key: DrainTaintKey, Effect: corev1.TaintEffectNoSchedule})
}

// AdoptedPrior is the record of a maintenance taken over from another
// operator, whose node is already cordoned and tainted and whose state from
// before was never recorded. Recording the node as it is now would keep it
// cordoned after the restore; this record instead restores it the way the
// medik8s node-maintenance-operator ends a maintenance: schedulable, without
// the maintenance taints and the exclude-from-remediation label. Taints and
// labels of anyone else are left alone, as in every restore.
//
// since stands for the cordon, whose time the other operator did not write
// down: pods created later that tolerate the maintenance taints stay (the
// creation of its NodeMaintenance is the earliest the cordon can have been).
// The node's foreign lifecycle conditions are recorded as Record does.
func AdoptedPrior(node *corev1.Node, since time.Time) Prior {
	return Prior{Adopted: true, CordonedAt: since.UTC().Truncate(time.Second), Conditions: recordConditions(node)}
}
