package validation

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

func TestValidateRolloutAdmitsRecoverySettings(t *testing.T) {
	for _, tt := range []struct {
		name    string
		gate    v1alpha1.RecoveryGate
		timeout time.Duration
	}{
		{"defaults", "", 0},
		{"Workloads for a minute", v1alpha1.RecoveryWorkloads, time.Minute},
		{"NodeReady", v1alpha1.RecoveryNodeReady, 0},
		{"NodeReady with a timeout", v1alpha1.RecoveryNodeReady, time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := validRollout()
			r.Spec.RecoveryGate = tt.gate
			if tt.timeout != 0 {
				r.Spec.RecoveryTimeout = dur(tt.timeout)
			}
			if err := ValidateRollout(r, false); err != nil {
				t.Fatalf("refused: %v", err)
			}
			if err := ValidateRolloutUpdate(validRollout(), r); err != nil {
				t.Fatalf("update refused: %v", err)
			}
		})
	}
}

func TestValidateRolloutRefusesRecoverySettingsNamingTheField(t *testing.T) {
	for _, tt := range []struct {
		name   string
		modify func(*v1alpha1.NodeMaintenanceRollout)
		want   string
	}{
		{"timeout zero", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.RecoveryTimeout = dur(0) },
			"spec.recoveryTimeout 0s must be positive (default 10m0s): it bounds the wait for the evicted workloads; to not wait for them, set recoveryGate: NodeReady"},
		{"timeout negative", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.RecoveryTimeout = dur(-time.Minute) },
			"spec.recoveryTimeout -1m0s must be positive"},
		{"gate unknown", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.RecoveryGate = "Pods" },
			`spec.recoveryGate "Pods" must be Workloads (`},
		{"gate in lower case", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.RecoveryGate = "nodeready" },
			`spec.recoveryGate "nodeready" must be Workloads`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, check := range []func(*v1alpha1.NodeMaintenanceRollout) error{
				func(r *v1alpha1.NodeMaintenanceRollout) error { return ValidateRollout(r, false) },
				func(r *v1alpha1.NodeMaintenanceRollout) error { return ValidateRolloutUpdate(validRollout(), r) },
			} {
				r := validRollout()
				tt.modify(r)
				err := check(r)
				var p Problems
				if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.As(err, &p) || len(p) != 1 {
					t.Fatalf("got %v\nwant exactly one problem, containing %q", err, tt.want)
				}
			}
		})
	}
}

func TestRecoveryDefaults(t *testing.T) {
	if g := RecoveryGateOrDefault(""); g != v1alpha1.RecoveryWorkloads {
		t.Errorf("default gate %q, want Workloads", g)
	}
	if g := RecoveryGateOrDefault(v1alpha1.RecoveryNodeReady); g != v1alpha1.RecoveryNodeReady {
		t.Errorf("gate NodeReady read as %q", g)
	}
	s := &v1alpha1.NodeMaintenanceRolloutSpec{}
	if d := RecoveryTimeoutOrDefault(s); d != 10*time.Minute {
		t.Errorf("default timeout %s, want 10m", d)
	}
	s.RecoveryTimeout = dur(20 * time.Second)
	if d := RecoveryTimeoutOrDefault(s); d != 20*time.Second {
		t.Errorf("timeout %s, want 20s", d)
	}
}
