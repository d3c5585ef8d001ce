package validation

import (
	"errors"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// validRollout is a rollout every rule admits: a selector, a step, every
// optional field set.
func validRollout() *v1alpha1.NodeMaintenanceRollout {
	return &v1alpha1.NodeMaintenanceRollout{
		ObjectMeta: metav1.ObjectMeta{Name: "pool-a"},
		Spec: v1alpha1.NodeMaintenanceRolloutSpec{
			NodeSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}},
			MaxUnavailable: ptr.To(intstr.FromString("30%")),
			Reason:         "kernel 6.12",
			Drain:          &v1beta1.DrainPolicy{Timeout: dur(30 * time.Minute), OnTimeout: v1beta1.DrainTimeoutRestore},
			Step:           validStep(),
			HoldFor:        dur(0),
			SoakFor:        dur(5 * time.Minute),
			OnFailure:      v1alpha1.RolloutContinue,
			MaxFailures:    ptr.To[int32](2),
		},
	}
}

func validStep() *v1alpha1.RolloutStep {
	return &v1alpha1.RolloutStep{
		Namespace: "maint",
		Timeout:   dur(20 * time.Minute),
		JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "patch", Image: "busybox:1.37", Command: []string{"sh", "-c", "true"}}},
		}}}},
	}
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func podSpec(r *v1alpha1.NodeMaintenanceRollout) *corev1.PodSpec {
	return &r.Spec.Step.JobTemplate.Spec.Template.Spec
}

func TestValidateRolloutAdmits(t *testing.T) {
	for _, tt := range []struct {
		name   string
		modify func(*v1alpha1.NodeMaintenanceRollout)
	}{
		{"every field", func(*v1alpha1.NodeMaintenanceRollout) {}},
		{"only a selector", func(r *v1alpha1.NodeMaintenanceRollout) {
			r.Spec = v1alpha1.NodeMaintenanceRolloutSpec{NodeSelector: r.Spec.NodeSelector}
		}},
		{"node names", func(r *v1alpha1.NodeMaintenanceRollout) {
			r.Spec.NodeSelector, r.Spec.NodeNames = nil, []string{"node02", "node01", "ip-10-0-0-1.ec2.internal"}
		}},
		{"an empty selector picks every node", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.NodeSelector = &metav1.LabelSelector{} }},
		{"a count", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(3)) }},
		{"100%", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.MaxUnavailable = ptr.To(intstr.FromString("100%")) }},
		{"1%", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.MaxUnavailable = ptr.To(intstr.FromString("1%")) }},
		{"Halt with maxFailures 0", func(r *v1alpha1.NodeMaintenanceRollout) {
			r.Spec.OnFailure, r.Spec.MaxFailures = v1alpha1.RolloutHalt, ptr.To[int32](0)
		}},
		{"OnFailure restart policy", func(r *v1alpha1.NodeMaintenanceRollout) { podSpec(r).RestartPolicy = corev1.RestartPolicyOnFailure }},
		{"restart policy unset (the operator sets Never)", func(r *v1alpha1.NodeMaintenanceRollout) { podSpec(r).RestartPolicy = "" }},
		{"a step without timeout", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Step.Timeout = nil }},
		{"no step, a hold", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Step, r.Spec.HoldFor = nil, dur(time.Minute) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := validRollout()
			tt.modify(r)
			if err := ValidateRollout(r, false); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

func TestValidateRolloutRefusesNamingTheField(t *testing.T) {
	for _, tt := range []struct {
		name   string
		modify func(*v1alpha1.NodeMaintenanceRollout)
		want   string
	}{
		{"both selector and names", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.NodeNames = []string{"node01"} },
			"spec.nodeSelector and spec.nodeNames are both set: set exactly one"},
		{"neither selector nor names", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.NodeSelector = nil },
			"the rollout names no node: set exactly one of spec.nodeSelector"},
		{"invalid selector", func(r *v1alpha1.NodeMaintenanceRollout) {
			r.Spec.NodeSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "pool", Operator: "Near"}}}
		}, `spec.nodeSelector is not a valid label selector: "Near" is not a valid label selector operator`},
		{"invalid label value", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.NodeSelector.MatchLabels["pool"] = "a b" },
			"spec.nodeSelector is not a valid label selector"},
		{"empty names", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.NodeSelector, r.Spec.NodeNames = nil, []string{} },
			"spec.nodeNames is empty: list at least one node"},
		{"invalid name", func(r *v1alpha1.NodeMaintenanceRollout) {
			r.Spec.NodeSelector, r.Spec.NodeNames = nil, []string{"node01", "Node_02"}
		},
			`spec.nodeNames[1] "Node_02" is not a valid node name`},
		{"duplicate name", func(r *v1alpha1.NodeMaintenanceRollout) {
			r.Spec.NodeSelector, r.Spec.NodeNames = nil, []string{"node01", "node02", "node01"}
		}, `spec.nodeNames[2] "node01" repeats spec.nodeNames[0]: list each node once`},
		{"maxUnavailable 0", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(0)) },
			"spec.maxUnavailable 0 must be at least 1"},
		{"maxUnavailable negative", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(-2)) },
			"spec.maxUnavailable -2 must be at least 1"},
		{"maxUnavailable 0%", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.MaxUnavailable = ptr.To(intstr.FromString("0%")) },
			`spec.maxUnavailable "0%" must be between 1% and 100% of the set`},
		{"maxUnavailable over 100%", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.MaxUnavailable = ptr.To(intstr.FromString("150%")) },
			`spec.maxUnavailable "150%" must be between 1% and 100% of the set`},
		{"maxUnavailable negative percentage", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.MaxUnavailable = ptr.To(intstr.FromString("-5%")) },
			`spec.maxUnavailable "-5%" is neither a count`},
		{"maxUnavailable malformed", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.MaxUnavailable = ptr.To(intstr.FromString("three")) },
			`spec.maxUnavailable "three" is neither a count (e.g. 3) nor a percentage`},
		{"maxUnavailable fraction", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.MaxUnavailable = ptr.To(intstr.FromString("1.5%")) },
			`spec.maxUnavailable "1.5%" is neither a count`},
		{"maxUnavailable count as a string", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.MaxUnavailable = ptr.To(intstr.FromString("3")) },
			`spec.maxUnavailable "3" is a string: write a count as a number (maxUnavailable: 3)`},
		{"maxUnavailable zero as a string", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.MaxUnavailable = ptr.To(intstr.FromString("0")) },
			`spec.maxUnavailable "0" must be a count of at least 1`},
		{"holdFor negative", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.HoldFor = dur(-time.Minute) },
			"spec.holdFor -1m0s must not be negative"},
		{"soakFor negative", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.SoakFor = dur(-time.Second) },
			"spec.soakFor -1s must not be negative"},
		{"step timeout negative", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Step.Timeout = dur(-time.Minute) },
			"spec.step.timeout -1m0s must be positive"},
		{"step timeout zero", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Step.Timeout = dur(0) },
			"spec.step.timeout 0s must be positive (e.g. 30m); leave it out"},
		{"drain timeout zero", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Drain.Timeout = dur(0) },
			"spec.drain.timeout 0s must be positive"},
		{"drain Force not allowed", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Drain.OnTimeout = v1beta1.DrainTimeoutForce },
			"spec.drain.onTimeout Force deletes the pods left after the timeout"},
		{"step namespace missing", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Step.Namespace = "" },
			"spec.step.namespace is required"},
		{"step namespace invalid", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Step.Namespace = "Maint.x" },
			`spec.step.namespace "Maint.x" is not a valid namespace name`},
		{"step without containers", func(r *v1alpha1.NodeMaintenanceRollout) { podSpec(r).Containers = nil },
			"spec.step.jobTemplate.spec.template.spec.containers is empty: give the step's Job at least one container"},
		{"container without image", func(r *v1alpha1.NodeMaintenanceRollout) { podSpec(r).Containers[0].Image = "" },
			`spec.step.jobTemplate.spec.template.spec.containers[0] ("patch") has no image`},
		{"init container without image", func(r *v1alpha1.NodeMaintenanceRollout) {
			podSpec(r).InitContainers = []corev1.Container{{Name: "prepare"}}
		}, `spec.step.jobTemplate.spec.template.spec.initContainers[0] ("prepare") has no image`},
		{"container without name", func(r *v1alpha1.NodeMaintenanceRollout) { podSpec(r).Containers[0].Name = "" },
			"spec.step.jobTemplate.spec.template.spec.containers[0] has no name"},
		{"restart policy Always", func(r *v1alpha1.NodeMaintenanceRollout) { podSpec(r).RestartPolicy = corev1.RestartPolicyAlways },
			`spec.step.jobTemplate.spec.template.spec.restartPolicy "Always" is not allowed for a Job: use Never or OnFailure`},
		{"onFailure unknown", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.OnFailure = "Retry" },
			`spec.onFailure "Retry" must be Halt`},
		{"maxFailures negative", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.MaxFailures = ptr.To[int32](-1) },
			"spec.maxFailures -1 must not be negative"},
		{"maxFailures with Halt", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.OnFailure = v1alpha1.RolloutHalt },
			"spec.maxFailures 2 has no effect with onFailure Halt, which halts at the first failed node: set onFailure: Continue, or drop maxFailures"},
		{"maxFailures with the default onFailure", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.OnFailure = "" },
			"spec.maxFailures 2 has no effect with onFailure Halt"},
		{"reason too long", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Reason = strings.Repeat("x", 1025) },
			"spec.reason is 1025 bytes long, more than 1024"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := validRollout()
			tt.modify(r)
			assertOneProblem(t, ValidateRollout(r, false), tt.want)
		})
	}
}

// assertOneProblem checks that err is a Problems of one problem, which
// contains want.
func assertOneProblem(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v\nwant an error containing %q", err, want)
	}
	var p Problems
	if !errors.As(err, &p) || len(p) != 1 {
		t.Fatalf("want exactly one problem, got %q", err)
	}
}

func TestValidateRolloutAllowsForceWhenTheInstallationDoes(t *testing.T) {
	r := validRollout()
	r.Spec.Drain.OnTimeout = v1beta1.DrainTimeoutForce
	if err := ValidateRollout(r, true); err != nil {
		t.Fatalf("refused with allowForce: %v", err)
	}
}

// One refusal lists every problem, so a user fixes them in one go.
func TestValidateRolloutReportsEveryProblemAtOnce(t *testing.T) {
	r := validRollout()
	r.Spec.NodeNames = []string{"node01"}
	r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(0))
	r.Spec.SoakFor = dur(-time.Minute)
	podSpec(r).Containers = nil
	err := ValidateRollout(r, false)
	var p Problems
	if !errors.As(err, &p) {
		t.Fatalf("got %v, want Problems", err)
	}
	for _, field := range []string{"spec.nodeSelector and spec.nodeNames", "spec.maxUnavailable 0", "spec.soakFor", "containers is empty"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("%q does not mention %s", err, field)
		}
	}
	if len(p) != 4 {
		t.Errorf("%d problems, want 4: %q", len(p), p)
	}
}

func TestMaxUnavailableNodes(t *testing.T) {
	for _, tt := range []struct {
		v     *intstr.IntOrString
		total int
		want  int
	}{
		{nil, 10, 1},
		{ptr.To(intstr.FromInt32(3)), 10, 3},
		{ptr.To(intstr.FromInt32(30)), 10, 30},
		{ptr.To(intstr.FromString("30%")), 10, 3},
		{ptr.To(intstr.FromString("25%")), 10, 2}, // rounds down
		{ptr.To(intstr.FromString("1%")), 10, 1},  // at least one
		{ptr.To(intstr.FromString("100%")), 7, 7},
	} {
		got, err := MaxUnavailableNodes(tt.v, tt.total)
		if err != nil || got != tt.want {
			t.Errorf("MaxUnavailableNodes(%v, %d) = %d, %v; want %d", tt.v, tt.total, got, err, tt.want)
		}
	}
	if _, err := MaxUnavailableNodes(ptr.To(intstr.FromInt32(0)), 10); err == nil {
		t.Error("0 accepted")
	}
}

func TestValidateRolloutUpdate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		modify func(*v1alpha1.NodeMaintenanceRollout)
		want   string // empty: admitted
	}{
		{"paused", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Paused = true }, ""},
		{"maxUnavailable", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(5)) }, ""},
		{"failure policy", func(r *v1alpha1.NodeMaintenanceRollout) {
			r.Spec.OnFailure, r.Spec.MaxFailures = v1alpha1.RolloutHalt, nil
		}, ""},
		{"durations and reason", func(r *v1alpha1.NodeMaintenanceRollout) {
			r.Spec.HoldFor, r.Spec.SoakFor, r.Spec.Reason = dur(time.Hour), nil, "firmware"
		}, ""},
		{"metadata only", func(r *v1alpha1.NodeMaintenanceRollout) { r.Finalizers = nil; r.Labels = map[string]string{"a": "b"} }, ""},
		{"nodeSelector", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.NodeSelector.MatchLabels["pool"] = "b" },
			"spec.nodeSelector cannot be changed after creation: create a new rollout with the new spec.nodeSelector"},
		{"selector to names", func(r *v1alpha1.NodeMaintenanceRollout) {
			r.Spec.NodeSelector, r.Spec.NodeNames = nil, []string{"node01"}
		},
			"spec.nodeSelector cannot be changed after creation"},
		{"drain", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Drain.Timeout = dur(time.Hour) },
			"spec.drain cannot be changed after creation"},
		{"step image", func(r *v1alpha1.NodeMaintenanceRollout) { podSpec(r).Containers[0].Image = "busybox:1.38" },
			"spec.step cannot be changed after creation"},
		{"step removed", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Step = nil },
			"spec.step cannot be changed after creation"},
		{"maxUnavailable to 0", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(0)) },
			"spec.maxUnavailable 0 must be at least 1"},
		{"soakFor negative", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.SoakFor = dur(-time.Minute) },
			"spec.soakFor -1m0s must not be negative"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			oldR, newR := validRollout(), validRollout()
			oldR.Finalizers = []string{v1alpha1.RolloutFinalizer}
			newR.Finalizers = []string{v1alpha1.RolloutFinalizer}
			tt.modify(newR)
			err := ValidateRolloutUpdate(oldR, newR)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v\nwant an error containing %q", err, tt.want)
			}
		})
	}
}

// Names an update cannot change are listed together, with what to do.
func TestValidateRolloutUpdateListsEveryImmutableField(t *testing.T) {
	oldR, newR := validRollout(), validRollout()
	newR.Spec.NodeSelector, newR.Spec.NodeNames = nil, []string{"node01"}
	newR.Spec.Drain = nil
	newR.Spec.Step.Namespace = "other"
	err := ValidateRolloutUpdate(oldR, newR)
	if err == nil {
		t.Fatal("admitted")
	}
	for _, field := range []string{"spec.nodeSelector", "spec.nodeNames", "spec.drain", "spec.step"} {
		if !strings.Contains(err.Error(), field+" cannot be changed after creation") {
			t.Errorf("%q does not refuse %s", err, field)
		}
	}
}

// The provider links this package: it must stay free of controller-runtime
// and of anything else heavier than the standard library, apimachinery and
// the API types, as api/v1beta1/validation.
func TestImportsStayLight(t *testing.T) {
	allowed := map[string]bool{
		"k8s.io/apimachinery/pkg/api/equality":    true,
		"k8s.io/apimachinery/pkg/apis/meta/v1":    true,
		"k8s.io/apimachinery/pkg/util/intstr":     true,
		"k8s.io/apimachinery/pkg/util/validation": true,
		// The Pod and Job types of the step: types only, which the provider links anyway.
		"k8s.io/api/core/v1": true,
		// The API types and their rules, which import the above only.
		"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1":           true,
		"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation": true,
		// The window's arithmetic: the standard library only.
		"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1/window": true,
		// A gate query is parsed as Prometheus parses it (model and parser
		// packages; no client-go, no controller-runtime).
		"github.com/prometheus/prometheus/promql/parser": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !allowed[path] && strings.Contains(strings.Split(path, "/")[0], ".") {
				t.Errorf("%s imports %s; this package may import only the standard library and %v", file, path, allowed)
			}
		}
	}
}
