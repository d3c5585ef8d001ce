package validation

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmvalidation "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
)

// nodeSetProblems checks which nodes the rollout names: exactly one of
// spec.nodeSelector and spec.nodeNames, a valid selector, valid names, each
// once. Whether the nodes exist is the webhook's check (it reads the
// cluster).
func nodeSetProblems(s *v1alpha1.NodeMaintenanceRolloutSpec) Problems {
	var p Problems
	switch {
	case s.NodeSelector != nil && s.NodeNames != nil:
		p = append(p, "spec.nodeSelector and spec.nodeNames are both set: set exactly one (nodeSelector picks nodes by label, nodeNames lists them in order)")
	case s.NodeSelector == nil && s.NodeNames == nil:
		p = append(p, "the rollout names no node: set exactly one of spec.nodeSelector (nodes by label) and spec.nodeNames (a list of nodes, maintained in order)")
	}
	if s.NodeSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(s.NodeSelector); err != nil {
			p = append(p, fmt.Sprintf("spec.nodeSelector is not a valid label selector: %v", err))
		}
	}
	if s.NodeNames != nil {
		p = append(p, nodeNameProblems(s.NodeNames)...)
	}
	return p
}

func nodeNameProblems(names []string) Problems {
	if len(names) == 0 {
		return Problems{"spec.nodeNames is empty: list at least one node, or use spec.nodeSelector"}
	}
	var p Problems
	first := map[string]int{}
	for i, name := range names {
		if errs := nmvalidation.NameProblems(name); len(errs) > 0 {
			p = append(p, fmt.Sprintf("spec.nodeNames[%d] %q is not a valid node name: %s", i, name, strings.Join(errs, "; ")))
			continue
		}
		if j, seen := first[name]; seen {
			p = append(p, fmt.Sprintf("spec.nodeNames[%d] %q repeats spec.nodeNames[%d]: list each node once", i, name, j))
			continue
		}
		first[name] = i
	}
	if len(p) == 0 {
		if size := SetSizeProblem("spec.nodeNames", names); size != "" {
			p = append(p, size)
		}
	}
	return p
}

// validateDrain is the NodeMaintenance's spec.drain rule: the rollout gives
// its drain to each node's NodeMaintenance, and the field has the same path.
func validateDrain(s *v1alpha1.NodeMaintenanceRolloutSpec, allowForce bool) error {
	return nmvalidation.ValidateDrain(s.Drain, allowForce)
}
