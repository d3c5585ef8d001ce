package provider

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	rolloutvalidation "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1/validation"
)

// rolloutFields are the rollout's spec fields as the API's rules
// (api/v1alpha1/validation) name them, and the resource's attributes. checked
// says that the attribute's own validators check the field already, so that
// validRollout does not report it twice.
var rolloutFields = []struct {
	spec, name string
	checked    bool
}{
	{"spec.maxUnavailable", "max_unavailable", false},
	{"spec.maxFailures", "max_failures", false},
	{"spec.onFailure", "on_failure", false},
	{"spec.step.jobTemplate", "step.job_template", false},
	{"spec.step.namespace", "step.namespace", true},
	{"spec.step.timeout", "step.timeout", true},
	{"spec.nodeSelector", "node_selector", true},
	{"spec.nodeNames", "node_names", true},
	{"spec.holdFor", "hold_for", true},
	{"spec.soakFor", "soak_for", true},
	{"spec.reason", "reason", true},
	{"spec.drain", "drain", true}, // validDrain
}

// rolloutNames renames the rollout's spec fields to the resource's
// attributes, longest first (see drainNames).
var rolloutNames = func() *strings.Replacer {
	fields := slices.Clone(rolloutFields)
	slices.SortStableFunc(fields, func(a, b struct {
		spec, name string
		checked    bool
	}) int {
		return len(b.spec) - len(a.spec)
	})
	pairs := make([]string, 0, 2*len(fields))
	for _, f := range fields {
		pairs = append(pairs, f.spec, f.name)
	}
	return strings.NewReplacer(pairs...)
}()

// validRollout checks the configuration at plan time with the rules the
// webhook applies (rolloutvalidation.ValidateRollout): the bounds of
// max_unavailable, on_failure with max_failures, and the step's Job. The
// rest has validators of its own on each attribute.
type validRollout struct{}

func (validRollout) Description(context.Context) string {
	return "the rollout follows the rules of NodeMaintenanceRollout (e.g. max_unavailable between 1 and 100%, a step Job with containers)"
}

func (v validRollout) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (validRollout) ValidateResource(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m rolloutResourceModel
	if diags := req.Config.Get(ctx, &m); diags.HasError() {
		return
	}
	if m.MaxUnavailable.IsNull() {
		m.MaxUnavailable = types.StringValue(defaultRolloutMaxUnavailable) // the schema's default, not applied to the config
	}
	spec, diags := m.spec(ctx)
	if diags.HasError() {
		return // the attributes' validators say what is wrong
	}
	resp.Diagnostics.Append(rolloutProblems(spec, unknownTemplate(ctx, m.Step))...)
}

// unknownTemplate tells whether the step's job_template is not known yet
// (it comes from another resource): the Job cannot be checked until apply.
func unknownTemplate(ctx context.Context, step types.Object) bool {
	if step.IsUnknown() {
		return true
	}
	if step.IsNull() {
		return false
	}
	var m stepModel
	return !step.As(ctx, &m, basetypes.ObjectAsOptions{}).HasError() && m.JobTemplate.IsUnknown()
}

// rolloutProblems are the problems ValidateRollout finds that no attribute
// validator reports, each on its attribute, in the attributes' names; with
// templateUnknown, none about the step's Job.
func rolloutProblems(spec nmv1alpha1.NodeMaintenanceRolloutSpec, templateUnknown bool) diag.Diagnostics {
	var diags diag.Diagnostics
	err := rolloutvalidation.ValidateRollout(&rollout{Spec: spec}, true)
	var problems rolloutvalidation.Problems
	if !errors.As(err, &problems) {
		return nil
	}
	for _, p := range problems {
		name, checked := rolloutAttribute(p)
		if name == "" || checked || (templateUnknown && name == "step.job_template") {
			continue
		}
		diags.AddAttributeError(attributePath(name), "Invalid Rollout", terraformNames(p))
	}
	return diags
}

// rolloutAttribute is the attribute a problem is about (the first field it
// names), and whether that attribute checks itself.
func rolloutAttribute(problem string) (name string, checked bool) {
	at := len(problem)
	for _, f := range rolloutFields {
		if i := strings.Index(problem, f.spec); i >= 0 && i < at {
			at, name, checked = i, f.name, f.checked
		}
	}
	return name, checked
}

func attributePath(name string) path.Path {
	parent, child, nested := strings.Cut(name, ".")
	if nested {
		return path.Root(parent).AtName(child)
	}
	return path.Root(name)
}
