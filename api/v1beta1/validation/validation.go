// Package validation holds the rules a NodeMaintenance and the operator's
// --max-unavailable flag must follow, for every side that checks them: the
// operator's admission webhook and flags, and the provider's plan-time
// checks. It imports only the standard library and k8s.io/apimachinery's
// validation and intstr packages, so that the provider can use it without
// linking controller-runtime.
package validation

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
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
