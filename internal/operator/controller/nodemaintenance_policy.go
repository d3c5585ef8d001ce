package controller

import (
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
)

// policy is spec.drain, never nil.
func policy(nm *nmv1beta1.NodeMaintenance) nmv1beta1.DrainPolicy {
	if nm.Spec.Drain == nil {
		return nmv1beta1.DrainPolicy{}
	}
	return *nm.Spec.Drain
}

// rules are the drain's rules for this pass: spec.drain, the node as read
// now, the cordon's time from the prior-state record, the clock, and the
// operator's own pods evicted last. The preview builds the same Rules from
// what it reads (drain.NewPreview), so the two classify every pod alike.
func (r *NodeMaintenanceReconciler) rules(s *scope) drain.Rules {
	rules := drain.Rules{Policy: s.nm.Spec.Drain, Node: s.node, CordonedAt: s.prior.CordonedAt, Now: r.now()}
	if own := r.Options.OperatorDeployment; own.Name != "" {
		rules.EvictLast = drain.OwnedByDeployment(own.Namespace, own.Name)
	}
	return rules
}
