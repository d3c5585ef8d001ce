package validation

import (
	"fmt"
	"time"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

// DefaultRecoveryTimeout is how long a restored node of a rollout without
// spec.recoveryTimeout waits for the workloads evicted from it to be fully
// available again before it fails.
const DefaultRecoveryTimeout = 10 * time.Minute

// RecoveryGateOrDefault is spec.recoveryGate, Workloads when unset.
func RecoveryGateOrDefault(g v1alpha1.RecoveryGate) v1alpha1.RecoveryGate {
	if g == "" {
		return v1alpha1.RecoveryWorkloads
	}
	return g
}

// RecoveryTimeoutOrDefault is spec.recoveryTimeout, DefaultRecoveryTimeout
// when unset.
func RecoveryTimeoutOrDefault(s *v1alpha1.NodeMaintenanceRolloutSpec) time.Duration {
	if s.RecoveryTimeout == nil {
		return DefaultRecoveryTimeout
	}
	return s.RecoveryTimeout.Duration
}

// recoveryProblems checks spec.recoveryGate and spec.recoveryTimeout: a
// timeout of 0 would fail every node with a workload to wait for, so not
// waiting is said with recoveryGate NodeReady instead.
func recoveryProblems(s *v1alpha1.NodeMaintenanceRolloutSpec) Problems {
	var p Problems
	switch s.RecoveryGate {
	case "", v1alpha1.RecoveryWorkloads, v1alpha1.RecoveryNodeReady:
	default:
		p = append(p, fmt.Sprintf("spec.recoveryGate %q must be %s (a restored node's slot goes on once the workloads evicted from it are fully available again, the default) or %s (once the node is Ready)",
			s.RecoveryGate, v1alpha1.RecoveryWorkloads, v1alpha1.RecoveryNodeReady))
	}
	if s.RecoveryTimeout != nil && s.RecoveryTimeout.Duration <= 0 {
		p = append(p, fmt.Sprintf("spec.recoveryTimeout %s must be positive (default %s): it bounds the wait for the evicted workloads; to not wait for them, set recoveryGate: %s",
			s.RecoveryTimeout.Duration, DefaultRecoveryTimeout, v1alpha1.RecoveryNodeReady))
	}
	return p
}
