// Package validation holds the rules a NodeMaintenanceRollout must follow,
// for every side that checks them: the operator's admission webhook and the
// provider's plan-time checks. Like api/v1beta1/validation, whose node-name
// and spec.drain rules it reuses, it imports only the standard library,
// k8s.io/apimachinery, k8s.io/api and the API types (with api/v1alpha1/window,
// the window's parser), so that the provider can use it without linking
// controller-runtime; and Prometheus's PromQL parser
// (github.com/prometheus/prometheus/promql/parser), so that a gate query is
// refused with Prometheus's own error at plan time as at admission.
package validation

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

// MaxReasonLength is the longest spec.reason, in bytes (the CRD's maxLength).
const MaxReasonLength = 1024

// DefaultMaxUnavailable is how many nodes of the set a rollout without
// spec.maxUnavailable takes out of service at once.
const DefaultMaxUnavailable = 1

// Problems is every way a rollout is invalid, one sentence each, naming the
// field, its value and what to do. Its Error joins them with "; ", as the
// NodeMaintenance rules do.
type Problems []string

func (p Problems) Error() string { return strings.Join(p, "; ") }

// err is p as an error, nil when there is no problem.
func (p Problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return p
}

// ValidateRollout checks a rollout's spec and returns every problem at once
// (a Problems), or nil. Force on a drain timeout deletes pods past their
// PodDisruptionBudgets: allowForce says whether the installation allows it
// (the operator's --allow-force-drain).
func ValidateRollout(r *v1alpha1.NodeMaintenanceRollout, allowForce bool) error {
	s := &r.Spec
	var p Problems
	p = append(p, nodeSetProblems(s)...)
	p = append(p, mutableProblems(s)...)
	if err := validateDrain(s, allowForce); err != nil {
		p = append(p, err.Error())
	}
	p = append(p, stepProblems(s.Step)...)
	return p.err()
}

// mutableProblems checks the fields an update may change.
func mutableProblems(s *v1alpha1.NodeMaintenanceRolloutSpec) Problems {
	var p Problems
	if _, err := ParseMaxUnavailable(s.MaxUnavailable); err != nil {
		p = append(p, err.Error())
	}
	p = append(p, durationProblem("spec.holdFor", s.HoldFor, "0s holds each node not at all; e.g. 10m"))
	p = append(p, durationProblem("spec.soakFor", s.SoakFor, "0s gives a node's slot to the next node as soon as it is Ready; e.g. 5m"))
	p = append(p, failureProblems(s)...)
	p = append(p, recoveryProblems(s)...)
	p = append(p, notifyProblems(s)...)
	if len(s.Reason) > MaxReasonLength {
		p = append(p, fmt.Sprintf("spec.reason is %d bytes long, more than %d: shorten it", len(s.Reason), MaxReasonLength))
	}
	p = append(p, windowProblems(s.Window)...)
	p = append(p, prometheusProblems(s.Gates)...)
	return compact(p)
}

// durationProblem refuses a negative duration; zero is the default.
func durationProblem(field string, d *metav1.Duration, hint string) string {
	if d == nil || d.Duration >= 0 {
		return ""
	}
	return fmt.Sprintf("%s %s must not be negative (%s)", field, d.Duration, hint)
}

func failureProblems(s *v1alpha1.NodeMaintenanceRolloutSpec) Problems {
	var p Problems
	switch s.OnFailure {
	case "", v1alpha1.RolloutHalt, v1alpha1.RolloutContinue:
	default:
		p = append(p, fmt.Sprintf("spec.onFailure %q must be %s (start no further node after a failure, the default) or %s (go on, up to spec.maxFailures failed nodes)",
			s.OnFailure, v1alpha1.RolloutHalt, v1alpha1.RolloutContinue))
	}
	if s.MaxFailures == nil {
		return p
	}
	if *s.MaxFailures < 0 {
		p = append(p, fmt.Sprintf("spec.maxFailures %d must not be negative: it is how many failed nodes onFailure Continue tolerates (0: halt at the first)", *s.MaxFailures))
	} else if *s.MaxFailures > 0 && onFailureOrDefault(s.OnFailure) == v1alpha1.RolloutHalt {
		// 0 is what Halt does anyway, so a client that always sends the
		// default is not refused.
		p = append(p, fmt.Sprintf("spec.maxFailures %d has no effect with onFailure %s, which halts at the first failed node: set onFailure: Continue, or drop maxFailures",
			*s.MaxFailures, onFailureOrDefault(s.OnFailure)))
	}
	return p
}

func onFailureOrDefault(a v1alpha1.RolloutFailureAction) v1alpha1.RolloutFailureAction {
	if a == "" {
		return v1alpha1.RolloutHalt
	}
	return a
}

// ParseMaxUnavailable reads spec.maxUnavailable: nil is DefaultMaxUnavailable
// nodes; a count must be at least 1, a percentage ("30%") between 1% and
// 100%. Like the --max-unavailable of the operator, a count is a number and
// a percentage a string: the string "3" is refused, as intstr would refuse
// it later.
func ParseMaxUnavailable(v *intstr.IntOrString) (intstr.IntOrString, error) {
	if v == nil {
		return intstr.FromInt32(DefaultMaxUnavailable), nil
	}
	if v.Type == intstr.Int {
		if v.IntVal < 1 {
			return *v, fmt.Errorf("spec.maxUnavailable %d must be at least 1: it is how many nodes of the set may be out of service at once", v.IntVal)
		}
		return *v, nil
	}
	digits, ok := strings.CutSuffix(v.StrVal, "%")
	if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return *v, malformedMaxUnavailable(v.StrVal)
	}
	pct, err := strconv.Atoi(digits)
	if err != nil || pct < 1 || pct > 100 {
		return *v, fmt.Errorf("spec.maxUnavailable %q must be between 1%% and 100%% of the set (a percentage rounds down, to at least one node)", v.StrVal)
	}
	return *v, nil
}

func malformedMaxUnavailable(s string) error {
	if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
		if n < 1 || n > math.MaxInt32 {
			return fmt.Errorf("spec.maxUnavailable %q must be a count of at least 1 or a percentage such as \"30%%\"", s)
		}
		return fmt.Errorf("spec.maxUnavailable %q is a string: write a count as a number (maxUnavailable: %d), or a percentage such as \"30%%\"", s, n)
	}
	return fmt.Errorf("spec.maxUnavailable %q is neither a count (e.g. 3) nor a percentage (e.g. \"30%%\")", s)
}

// MaxUnavailableNodes is how many nodes of a set of total nodes a rollout
// takes out of service at once: the count, or the percentage of total
// rounded down but at least one.
func MaxUnavailableNodes(v *intstr.IntOrString, total int) (int, error) {
	parsed, err := ParseMaxUnavailable(v)
	if err != nil {
		return 0, err
	}
	if parsed.Type == intstr.Int {
		return int(parsed.IntVal), nil
	}
	pct, _ := strconv.Atoi(strings.TrimSuffix(parsed.StrVal, "%"))
	return max(1, pct*total/100), nil
}

// compact drops the empty strings of the checks that found nothing.
func compact(p Problems) Problems {
	out := p[:0]
	for _, s := range p {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
