package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

// ValidateRolloutUpdate checks an update of a rollout and returns every
// problem at once (a Problems), or nil: spec.nodeSelector, spec.nodeNames,
// spec.drain and spec.step cannot change (the rollout has resolved its
// nodes, and its NodeMaintenances and Jobs follow them); spec.paused,
// maxUnavailable, maxFailures, onFailure, holdFor, soakFor, reason, window
// and gates may, within the same rules as at creation.
func ValidateRolloutUpdate(oldR, newR *v1alpha1.NodeMaintenanceRollout) error {
	o, n := &oldR.Spec, &newR.Spec
	var p Problems
	p = append(p, immutable("spec.nodeSelector", equality.Semantic.DeepEqual(o.NodeSelector, n.NodeSelector))...)
	p = append(p, immutable("spec.nodeNames", equality.Semantic.DeepEqual(o.NodeNames, n.NodeNames))...)
	p = append(p, immutable("spec.drain", equality.Semantic.DeepEqual(o.Drain, n.Drain))...)
	p = append(p, immutable("spec.step", StepUnchanged(oldR, newR))...)
	p = append(p, mutableProblems(n)...)
	return p.err()
}

// StepUnchanged says whether an update leaves spec.step as it was.
func StepUnchanged(oldR, newR *v1alpha1.NodeMaintenanceRollout) bool {
	return equality.Semantic.DeepEqual(oldR.Spec.Step, newR.Spec.Step)
}

func immutable(field string, unchanged bool) Problems {
	if unchanged {
		return nil
	}
	return Problems{fmt.Sprintf("%s cannot be changed after creation: create a new rollout with the new %s "+
		"(deleting this one restores the nodes it holds); only paused, maxUnavailable, maxFailures, onFailure, holdFor, soakFor, reason, recoveryGate, recoveryTimeout, gates, window and notify can change",
		field, field)}
}
