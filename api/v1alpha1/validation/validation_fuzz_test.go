package validation

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// rolloutInput is what the fuzzer varies in a rollout: every field a rule
// reads, and whether each optional one is set (bits of set).
type rolloutInput struct {
	set                               uint16
	selKey, selOp, selValue, names    string
	maxUnavailableInt                 int32
	maxUnavailableStr                 string
	holdFor, soakFor, stepTimeout     int64
	namespace, image, restart, action string
	maxFailures                       int32
}

const (
	setSelector = 1 << iota
	setNames
	setMaxUnavailableInt
	setMaxUnavailableStr
	setHoldFor
	setSoakFor
	setStep
	setStepTimeout
	setMaxFailures
	setDrain
	setContainer
)

func (in rolloutInput) has(bit uint16) bool { return in.set&bit != 0 }

func (in rolloutInput) rollout() *v1alpha1.NodeMaintenanceRollout {
	s := v1alpha1.NodeMaintenanceRolloutSpec{OnFailure: v1alpha1.RolloutFailureAction(in.action)}
	if in.has(setSelector) {
		s.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: in.selKey, Operator: metav1.LabelSelectorOperator(in.selOp), Values: strings.Split(in.selValue, ","),
		}}}
	}
	if in.has(setNames) {
		s.NodeNames = strings.Split(in.names, ",")
	}
	switch {
	case in.has(setMaxUnavailableInt):
		s.MaxUnavailable = &intstr.IntOrString{Type: intstr.Int, IntVal: in.maxUnavailableInt}
	case in.has(setMaxUnavailableStr):
		s.MaxUnavailable = &intstr.IntOrString{Type: intstr.String, StrVal: in.maxUnavailableStr}
	}
	s.HoldFor = optionalDuration(in.has(setHoldFor), in.holdFor)
	s.SoakFor = optionalDuration(in.has(setSoakFor), in.soakFor)
	if in.has(setMaxFailures) {
		s.MaxFailures = &in.maxFailures
	}
	if in.has(setDrain) {
		s.Drain = &v1beta1.DrainPolicy{Timeout: optionalDuration(true, in.stepTimeout), OnTimeout: v1beta1.DrainTimeoutAction(in.action)}
	}
	if in.has(setStep) {
		s.Step = &v1alpha1.RolloutStep{Namespace: in.namespace, Timeout: optionalDuration(in.has(setStepTimeout), in.stepTimeout)}
		pod := &s.Step.JobTemplate.Spec.Template.Spec
		pod.RestartPolicy = corev1.RestartPolicy(in.restart)
		if in.has(setContainer) {
			pod.Containers = []corev1.Container{{Name: in.names, Image: in.image}}
		}
	}
	return &v1alpha1.NodeMaintenanceRollout{Spec: s}
}

func optionalDuration(set bool, d int64) *metav1.Duration {
	if !set {
		return nil
	}
	return &metav1.Duration{Duration: time.Duration(d)}
}

// The validator never panics, whatever the input; each problem names the
// field it is about; the same input gives the same answer; and an update
// that changes nothing is refused only for what the create would refuse of
// the mutable fields, never for an immutable one.
func FuzzValidateRolloutNeverPanics(f *testing.F) {
	f.Add(uint16(0x7ff), "pool", "In", "a,b", "node01,node02", int32(2), "30%", int64(0), int64(time.Minute), int64(time.Hour), "maint", "busybox", "Never", "Continue", int32(1))
	f.Add(uint16(setNames), "", "", "", "node01,node01,Node_3,", int32(0), "", int64(-1), int64(-1), int64(0), "", "", "", "Retry", int32(-1))
	f.Add(uint16(setSelector|setMaxUnavailableStr|setStep), "a b", "Near", "", "", int32(-5), "150%", int64(0), int64(0), int64(0), "Bad.NS", "", "Always", "Halt", int32(3))
	f.Add(uint16(setSelector|setMaxUnavailableStr), "pool", "Exists", "x", "", int32(0), "99999999999999999999%", int64(0), int64(0), int64(0), "", "", "", "", int32(0))
	f.Add(uint16(0), "", "", "", "", int32(0), "", int64(0), int64(0), int64(0), "", "", "", "", int32(0))
	f.Fuzz(func(t *testing.T, set uint16, selKey, selOp, selValue, names string, muInt int32, muStr string,
		holdFor, soakFor, stepTimeout int64, namespace, image, restart, action string, maxFailures int32) {
		in := rolloutInput{set: set, selKey: selKey, selOp: selOp, selValue: selValue, names: names,
			maxUnavailableInt: muInt, maxUnavailableStr: muStr, holdFor: holdFor, soakFor: soakFor, stepTimeout: stepTimeout,
			namespace: namespace, image: image, restart: restart, action: action, maxFailures: maxFailures}
		for _, allowForce := range []bool{false, true} {
			err := ValidateRollout(in.rollout(), allowForce)
			assertProblemsNameFields(t, err)
			if again := ValidateRollout(in.rollout(), allowForce); (err == nil) != (again == nil) || err != nil && err.Error() != again.Error() {
				t.Fatalf("not deterministic: %v then %v", err, again)
			}
		}
		err := ValidateRolloutUpdate(in.rollout(), in.rollout())
		assertProblemsNameFields(t, err)
		if err != nil && strings.Contains(err.Error(), "cannot be changed") {
			t.Fatalf("an update that changes nothing is refused as a change: %v", err)
		}
	})
}

func assertProblemsNameFields(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var p Problems
	if !errors.As(err, &p) || len(p) == 0 {
		t.Fatalf("error %q is not a list of problems", err)
	}
	for _, problem := range p {
		if !strings.HasPrefix(problem, "spec.") && !strings.HasPrefix(problem, "the rollout names no node") {
			t.Fatalf("problem %q does not start with the field it is about", problem)
		}
	}
}
