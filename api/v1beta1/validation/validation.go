// Package validation holds the rules a NodeMaintenance and the operator's
// --max-unavailable flag must follow, for every side that checks them: the
// operator's admission webhook and flags, and the provider's plan-time
// checks, and the guards on the nodes a maintenance may take (guard.go). It
// imports only the standard library, k8s.io/apimachinery, k8s.io/api and the
// API types, so that the provider can use it without linking
// controller-runtime.
package validation

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// MaxNameLength is the longest name of a Node or of a NodeMaintenance, in
// bytes (the CRD's spec.nodeName maxLength).
const MaxNameLength = validation.DNS1123SubdomainMaxLength

// NameProblems says why name cannot be the name of a Node or of a
// NodeMaintenance, a DNS-1123 subdomain: one to MaxNameLength lowercase
// letters, digits, '-' and '.'. It returns nothing for a valid name.
func NameProblems(name string) []string {
	return validation.IsDNS1123Subdomain(name)
}

// ValidateNodeName checks that name can be the name of a Node, with the
// error the admission webhook returns for spec.nodeName.
func ValidateNodeName(name string) error {
	if name == "" {
		return fmt.Errorf("spec.nodeName is required: name the node to put into maintenance")
	}
	if errs := NameProblems(name); len(errs) > 0 {
		return fmt.Errorf("spec.nodeName %q is not a valid node name: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// ParseMaxUnavailable reads the --max-unavailable flag: a count ("2") or a
// percentage ("20%"). A count too large for the int32 of an IntOrString is
// refused as such; intstr.Parse would take it for a malformed percentage and
// the error would say "string is not a percentage".
func ParseMaxUnavailable(s string) (intstr.IntOrString, error) {
	v := intstr.FromString(s)
	if s != "" && strings.Trim(s, "+-0123456789") == "" {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return intstr.IntOrString{}, fmt.Errorf("invalid --max-unavailable %q: a count of nodes must be between 0 and %d", s, math.MaxInt32)
		}
		v = intstr.FromInt32(int32(n))
	}
	_, err := MaxUnavailableNodes(&v, 100)
	return v, err
}

// What the operator does with a NodeMaintenance created while
// --max-unavailable nodes are in maintenance already
// (--max-unavailable-policy).
const (
	// MaxUnavailableQueue admits it and lets it wait, not touching its node,
	// until a slot frees; maintenances start in the order they were created.
	MaxUnavailableQueue = "Queue"
	// MaxUnavailableRefuse has the admission webhook refuse its create.
	MaxUnavailableRefuse = "Refuse"
	// DefaultMaxUnavailablePolicy is the policy of an operator run without
	// --max-unavailable-policy, and of an installation without
	// max_unavailable_policy.
	DefaultMaxUnavailablePolicy = MaxUnavailableQueue
)

// MaxUnavailablePolicies are the values --max-unavailable-policy accepts.
var MaxUnavailablePolicies = []string{MaxUnavailableQueue, MaxUnavailableRefuse}

// ParseMaxUnavailablePolicy reads the --max-unavailable-policy flag; empty
// is DefaultMaxUnavailablePolicy.
func ParseMaxUnavailablePolicy(s string) (string, error) {
	switch s {
	case "":
		return DefaultMaxUnavailablePolicy, nil
	case MaxUnavailableQueue, MaxUnavailableRefuse:
		return s, nil
	}
	return "", fmt.Errorf("invalid --max-unavailable-policy %q: must be %s (wait for a slot) or %s (the webhook refuses the create)",
		s, MaxUnavailableQueue, MaxUnavailableRefuse)
}

// MaxUnavailableNodes turns a count or percentage into a number of nodes:
// a percentage of total rounds down but is never below one, so a small
// cluster can still maintain a node.
func MaxUnavailableNodes(v *intstr.IntOrString, total int) (int, error) {
	n, err := intstr.GetScaledValueFromIntOrPercent(v, total, false)
	if err != nil {
		return 0, fmt.Errorf("invalid --max-unavailable %q: %w", v.String(), err)
	}
	if n < 0 && v.Type == intstr.String && !strings.HasPrefix(v.StrVal, "-") {
		// intstr scales through float64: a huge percentage overflows int on
		// conversion (to MinInt on amd64). It allows every node; it is not
		// negative.
		n = math.MaxInt
	}
	if n < 0 {
		return 0, fmt.Errorf("invalid --max-unavailable %q: must not be negative", v.String())
	}
	if v.Type == intstr.String && n < 1 {
		n = 1
	}
	return n, nil
}

// ValidateDrain checks spec.drain, with errors that name the field. Force
// on timeout deletes pods past their PodDisruptionBudgets: allowForce says
// whether the installation allows it (the operator's --allow-force-drain).
func ValidateDrain(d *v1beta1.DrainPolicy, allowForce bool) error {
	if d == nil {
		return nil
	}
	var problems []string
	if d.Timeout != nil && d.Timeout.Duration <= 0 {
		problems = append(problems, fmt.Sprintf("spec.drain.timeout %s must be positive (e.g. 30m)", d.Timeout.Duration))
	}
	switch d.OnTimeout {
	case "", v1beta1.DrainTimeoutFail, v1beta1.DrainTimeoutRestore, v1beta1.DrainTimeoutForce:
	default:
		problems = append(problems, fmt.Sprintf("spec.drain.onTimeout %q must be one of Fail, Restore, Force", d.OnTimeout))
	}
	if d.OnTimeout != "" && d.Timeout == nil {
		problems = append(problems, fmt.Sprintf("spec.drain.onTimeout %s needs spec.drain.timeout: say how long to try before it applies", d.OnTimeout))
	}
	if d.OnTimeout == v1beta1.DrainTimeoutForce && !allowForce {
		problems = append(problems, "spec.drain.onTimeout Force deletes the pods left after the timeout, bypassing their PodDisruptionBudgets, "+
			"and this installation does not allow it: install the operator with allow_force_drain = true (nodemaintenance_operator) "+
			"or --allow-force-drain, or choose Fail or Restore")
	}
	if d.PodSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(d.PodSelector); err != nil {
			problems = append(problems, fmt.Sprintf("spec.drain.podSelector is not a valid label selector: %v", err))
		}
	}
	if d.GracePeriodSeconds != nil && *d.GracePeriodSeconds < 0 {
		problems = append(problems, fmt.Sprintf("spec.drain.gracePeriodSeconds %d must not be negative (0 asks for an immediate stop; leave it out for each pod's own)", *d.GracePeriodSeconds))
	}
	if d.SkipWaitForDeleteTimeout != nil && d.SkipWaitForDeleteTimeout.Duration <= 0 {
		problems = append(problems, fmt.Sprintf("spec.drain.skipWaitForDeleteTimeout %s must be positive (e.g. 5m)", d.SkipWaitForDeleteTimeout.Duration))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}
