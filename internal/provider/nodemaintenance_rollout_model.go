package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	rolloutvalidation "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1/validation"
	nmvalidation "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
)

// defaultRolloutMaxUnavailable is spec.maxUnavailable when it is not set;
// the schema shows it so that the plan says what the operator will do.
var defaultRolloutMaxUnavailable = strconv.Itoa(rolloutvalidation.DefaultMaxUnavailable)

// rolloutResourceModel is the nodemaintenance_rollout resource.
type rolloutResourceModel struct {
	ID       types.String   `tfsdk:"id"`
	Name     types.String   `tfsdk:"name"`
	Timeouts timeouts.Value `tfsdk:"timeouts"`
	// WaitForCompletion false has an apply return once the node set is
	// resolved.
	WaitForCompletion types.Bool `tfsdk:"wait_for_completion"`
	rolloutSpecModel
	rolloutStatusModel
}

func (m *rolloutResourceModel) timeoutsBlock() timeouts.Value { return m.Timeouts }

// rolloutSpecModel is spec, in the resource's names.
type rolloutSpecModel struct {
	NodeSelector   types.String `tfsdk:"node_selector"`
	NodeNames      types.List   `tfsdk:"node_names"`
	MaxUnavailable types.String `tfsdk:"max_unavailable"`
	Reason         types.String `tfsdk:"reason"`
	Drain          types.Object `tfsdk:"drain"`
	Step           types.Object `tfsdk:"step"`
	HoldFor        types.String `tfsdk:"hold_for"`
	SoakFor        types.String `tfsdk:"soak_for"`
	OnFailure      types.String `tfsdk:"on_failure"`
	MaxFailures    types.Int64  `tfsdk:"max_failures"`
	Paused         types.Bool   `tfsdk:"paused"`
	rolloutSafetyModel
}

// stepModel is the step block.
type stepModel struct {
	Namespace   types.String `tfsdk:"namespace"`
	JobTemplate types.String `tfsdk:"job_template"`
	Timeout     types.String `tfsdk:"timeout"`
}

var stepAttrTypes = map[string]attr.Type{"namespace": types.StringType, "job_template": types.StringType, "timeout": types.StringType}

// spec turns the model into the rollout's spec; errors name the attribute.
// Unknown values leave their field unset (plan time).
func (m rolloutSpecModel) spec(ctx context.Context) (nmv1alpha1.NodeMaintenanceRolloutSpec, diag.Diagnostics) {
	var diags diag.Diagnostics
	s := nmv1alpha1.NodeMaintenanceRolloutSpec{
		Reason:    m.Reason.ValueString(),
		OnFailure: nmv1alpha1.RolloutFailureAction(m.OnFailure.ValueString()),
		Paused:    m.Paused.ValueBool(),
	}
	if known(m.NodeSelector) {
		sel, err := parseSelector(m.NodeSelector.ValueString())
		if err != nil {
			diags.AddAttributeError(path.Root("node_selector"), "Invalid Node Selector", fmt.Sprintf(
				"node_selector %q is not a label selector as kubectl -l takes it (e.g. pool=blue,zone!=a): %v", m.NodeSelector.ValueString(), err))
		}
		s.NodeSelector = sel
	}
	if !m.NodeNames.IsNull() && !m.NodeNames.IsUnknown() {
		diags.Append(m.NodeNames.ElementsAs(ctx, &s.NodeNames, false)...)
	}
	if known(m.MaxUnavailable) {
		v, err := nmvalidation.ParseMaxUnavailable(m.MaxUnavailable.ValueString())
		if err != nil {
			diags.AddAttributeError(path.Root("max_unavailable"), "Invalid Max Unavailable", maxUnavailableProblem(m.MaxUnavailable.ValueString()))
		}
		s.MaxUnavailable = &v
	}
	s.HoldFor = specDuration(m.HoldFor, path.Root("hold_for"), &diags)
	s.SoakFor = specDuration(m.SoakFor, path.Root("soak_for"), &diags)
	if !m.MaxFailures.IsNull() && !m.MaxFailures.IsUnknown() {
		n := int32(m.MaxFailures.ValueInt64())
		s.MaxFailures = &n
	}
	policy, d := drainPolicy(ctx, m.Drain)
	diags.Append(d...)
	s.Drain = policy
	step, d := stepSpec(ctx, m.Step)
	diags.Append(d...)
	s.Step = step
	diags.Append(m.safetySpec(ctx, &s)...)
	return s, diags
}

func known(v types.String) bool { return !v.IsNull() && !v.IsUnknown() }

func maxUnavailableProblem(s string) string {
	return fmt.Sprintf("max_unavailable %q is not a number of nodes (like \"3\") or a percentage of the rollout's nodes (like \"30%%\"): "+
		"a count of at least 1, or a percentage from 1%% to 100%%, rounded down to at least one node.", s)
}

// specDuration is a duration attribute as a metav1.Duration, nil when unset.
func specDuration(v types.String, at path.Path, diags *diag.Diagnostics) *metav1.Duration {
	if !known(v) {
		return nil
	}
	d, err := time.ParseDuration(v.ValueString())
	if err != nil {
		diags.AddAttributeError(at, "Invalid Duration", fmt.Sprintf("%s %q is not a Go duration (e.g. 10m, 1h30m): %v", at, v.ValueString(), err))
		return nil
	}
	return &metav1.Duration{Duration: d}
}

// stepSpec turns the step block into spec.step; nil without a block.
func stepSpec(ctx context.Context, block types.Object) (*nmv1alpha1.RolloutStep, diag.Diagnostics) {
	if block.IsNull() || block.IsUnknown() {
		return nil, nil
	}
	var m stepModel
	diags := block.As(ctx, &m, basetypes.ObjectAsOptions{})
	if diags.HasError() {
		return nil, diags
	}
	step := &nmv1alpha1.RolloutStep{Namespace: m.Namespace.ValueString()}
	if known(m.JobTemplate) {
		t, err := parseJobTemplate(m.JobTemplate.ValueString())
		if err != nil {
			diags.AddAttributeError(path.Root("step").AtName("job_template"), "Invalid Step Job Template", err.Error())
		}
		step.JobTemplate = t
	}
	step.Timeout = specDuration(m.Timeout, path.Root("step").AtName("timeout"), &diags)
	return step, diags
}

// parseJobTemplate reads job_template: a batch/v1 JobTemplateSpec (metadata
// and spec, as under a CronJob's jobTemplate) in YAML or JSON. Unknown
// fields are refused: a misspelt field would otherwise be dropped silently.
// What the Job must hold (containers, a restart policy) is the API's rule,
// checked by validRollout.
func parseJobTemplate(s string) (batchv1.JobTemplateSpec, error) {
	var t batchv1.JobTemplateSpec
	if err := yaml.UnmarshalStrict([]byte(s), &t); err != nil {
		return t, fmt.Errorf("job_template is not a batch/v1 JobTemplateSpec in YAML or JSON (metadata and spec, as under a CronJob's "+
			"jobTemplate; for example yamlencode({ spec = { template = { spec = { containers = [...], restartPolicy = \"Never\" } } } })): %v", err)
	}
	return t, nil
}

// readSpec sets the model from the rollout's spec. Where the prior value
// (state or plan) says the same thing in other words (30m and 30m0s, YAML
// and JSON, pool!=a and pool notin (a)), the prior value is kept, so that a
// refresh shows no change.
func (m *rolloutSpecModel) readSpec(ctx context.Context, s nmv1alpha1.NodeMaintenanceRolloutSpec) diag.Diagnostics {
	var diags diag.Diagnostics
	m.NodeSelector = selectorValue(s.NodeSelector, m.NodeSelector)
	if s.NodeNames != nil || !m.NodeNames.IsNull() {
		names, d := types.ListValueFrom(ctx, types.StringType, s.NodeNames)
		diags.Append(d...)
		m.NodeNames = names
	}
	m.MaxUnavailable = maxUnavailableValue(s.MaxUnavailable, m.MaxUnavailable)
	if s.Reason != "" || !m.Reason.IsNull() {
		m.Reason = types.StringValue(s.Reason)
	}
	drain, d := drainBlock(ctx, s.Drain, m.Drain)
	diags.Append(d...)
	m.Drain = drain
	step, d := stepBlock(ctx, s.Step, m.Step)
	diags.Append(d...)
	m.Step = step
	m.HoldFor = durationValue(s.HoldFor, m.HoldFor)
	m.SoakFor = durationValue(s.SoakFor, m.SoakFor)
	m.OnFailure = types.StringNull()
	if s.OnFailure != "" {
		m.OnFailure = types.StringValue(string(s.OnFailure))
	}
	m.MaxFailures = types.Int64Null()
	if s.MaxFailures != nil {
		m.MaxFailures = types.Int64Value(int64(*s.MaxFailures))
	}
	m.Paused = types.BoolValue(s.Paused)
	diags.Append(m.readSafety(ctx, s)...)
	return diags
}

func selectorValue(sel *metav1.LabelSelector, prior types.String) types.String {
	if sel == nil {
		return types.StringNull()
	}
	if known(prior) {
		if was, err := parseSelector(prior.ValueString()); err == nil && equality.Semantic.DeepEqual(was, sel) {
			return prior
		}
	}
	return types.StringValue(metav1.FormatLabelSelector(sel))
}

func maxUnavailableValue(v *intstr.IntOrString, prior types.String) types.String {
	now := defaultRolloutMaxUnavailable
	if v != nil {
		now = v.String()
	}
	if known(prior) {
		if was, err := nmvalidation.ParseMaxUnavailable(prior.ValueString()); err == nil && was.String() == now {
			return prior
		}
	}
	return types.StringValue(now)
}

func durationValue(d *metav1.Duration, prior types.String) types.String {
	if d == nil {
		return types.StringNull()
	}
	if known(prior) {
		if was, err := time.ParseDuration(prior.ValueString()); err == nil && was == d.Duration {
			return prior
		}
	}
	return types.StringValue(d.Duration.String())
}

// stepBlock is spec.step as the step block; the job template is written as
// JSON unless the prior block's template parses to the same Job.
func stepBlock(ctx context.Context, step *nmv1alpha1.RolloutStep, prior types.Object) (types.Object, diag.Diagnostics) {
	if step == nil {
		return types.ObjectNull(stepAttrTypes), nil
	}
	var was stepModel
	if !prior.IsNull() && !prior.IsUnknown() {
		if d := prior.As(ctx, &was, basetypes.ObjectAsOptions{}); d.HasError() {
			return prior, d
		}
	}
	template := was.JobTemplate
	if t, err := parseJobTemplate(template.ValueString()); !known(template) || err != nil || !equality.Semantic.DeepEqual(t, step.JobTemplate) {
		js, err := json.Marshal(step.JobTemplate)
		if err != nil {
			var diags diag.Diagnostics
			diags.AddError("Cannot Read the Step's Job Template", fmt.Sprintf("The rollout's spec.step.jobTemplate could not be written as JSON: %v", err))
			return prior, diags
		}
		template = types.StringValue(string(js))
	}
	return types.ObjectValue(stepAttrTypes, map[string]attr.Value{
		"namespace":    types.StringValue(step.Namespace),
		"job_template": template,
		"timeout":      durationValue(step.Timeout, was.Timeout),
	})
}
