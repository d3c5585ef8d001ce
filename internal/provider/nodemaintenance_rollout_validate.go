package provider

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strconv"
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
type rolloutField struct {
	spec, name string
	checked    bool
}

var rolloutFields = []rolloutField{
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
	{"spec.recoveryGate", "recovery_gate", true},
	{"spec.recoveryTimeout", "recovery_timeout", true},
	{"spec.gates", "gates", false},
	{"spec.window", "window", false},
	{"spec.notify", "notify", false},
}

// specField matches a field path of the API's rules: spec.window.timeZone,
// spec.notify[0].secretRef.name.
var specField = regexp.MustCompile(`spec(\.[A-Za-z][A-Za-z0-9]*(\[[0-9]+\])?)+`)

// snakeNames are the words of the rollout's field paths that the resource
// writes in snake case; every other word is the same in both.
var snakeNames = map[string]string{
	"maxUnavailable": "max_unavailable", "maxFailures": "max_failures", "onFailure": "on_failure", "jobTemplate": "job_template",
	"nodeSelector": "node_selector", "nodeNames": "node_names", "holdFor": "hold_for", "soakFor": "soak_for",
	"recoveryGate": "recovery_gate", "recoveryTimeout": "recovery_timeout", "timeZone": "time_zone", "secretRef": "secret_ref",
}

// rolloutAttributeName is a rollout's field path (spec.notify[0].secretRef)
// in the resource's names (notify[0].secret_ref), or "" for a path that is
// not the rollout's. Inside step.job_template the Job's own names stay.
func rolloutAttributeName(field string) string {
	segs := strings.Split(strings.TrimPrefix(field, "spec."), ".")
	first, _, _ := strings.Cut(segs[0], "[")
	if !slices.ContainsFunc(rolloutFields, func(f rolloutField) bool { return strings.HasPrefix(f.spec, "spec."+first) }) {
		return ""
	}
	for i, seg := range segs {
		word, index, _ := strings.Cut(seg, "[")
		if n, ok := snakeNames[word]; ok {
			word = n
		}
		if index != "" {
			word += "[" + index
		}
		segs[i] = word
		if word == "job_template" {
			break
		}
	}
	return strings.Join(segs, ".")
}

// rolloutTerraformNames renames the rollout's field paths in msg.
func rolloutTerraformNames(msg string) string {
	return specField.ReplaceAllStringFunc(msg, func(field string) string {
		if name := rolloutAttributeName(field); name != "" {
			return name
		}
		return field
	})
}

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

// rolloutAttribute is the attribute a problem is about (the first rollout
// field it names, in the resource's names), and whether that attribute
// checks itself (the field's row in rolloutFields, by longest prefix).
func rolloutAttribute(problem string) (name string, checked bool) {
	for _, field := range specField.FindAllString(problem, -1) {
		if name = rolloutAttributeName(field); name == "" {
			continue
		}
		if before, _, inside := strings.Cut(name, "job_template."); inside {
			name = before + "job_template" // the rest is inside the Job's value
		}
		best := 0
		for _, f := range rolloutFields {
			if strings.HasPrefix(field, f.spec) && len(f.spec) > best {
				best, checked = len(f.spec), f.checked
			}
		}
		return name, checked
	}
	return "", false
}

// attributePath is an attribute's name as a path: notify[0].secret_ref.name.
func attributePath(name string) path.Path {
	var p path.Path
	for i, seg := range strings.Split(name, ".") {
		word, index, _ := strings.Cut(seg, "[")
		if i == 0 {
			p = path.Root(word)
		} else {
			p = p.AtName(word)
		}
		if n, err := strconv.Atoi(strings.TrimSuffix(index, "]")); index != "" && err == nil {
			p = p.AtListIndex(n)
		}
	}
	return p
}
