package provider

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	nmvalidation "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
)

// Plan-time checks for values the cluster would refuse anyway. Refusing them
// in the plan names the attribute and the value, and nothing is sent to the
// cluster. The rules are the ones the CRD and the operator apply, quoted from
// api/v1beta1/validation (node names, --max-unavailable) and
// nmv1beta1.MaxReasonLength; that package is free of controller-runtime, so
// the provider links none of the operator.

var (
	_ resource.ResourceWithConfigValidators = &NodeMaintenanceResource{}
	_ resource.ResourceWithConfigValidators = &OperatorResource{}
	_ provider.ProviderWithConfigValidators = &NodeMaintenanceProvider{}
)

// ConfigValidators of the provider block.
func (p *NodeMaintenanceProvider) ConfigValidators(context.Context) []provider.ConfigValidator {
	return []provider.ConfigValidator{atMostOneExec{}}
}

// ConfigValidators of the nodemaintenance resource.
func (r *NodeMaintenanceResource) ConfigValidators(context.Context) []resource.ConfigValidator {
	return []resource.ConfigValidator{positiveTimeouts{"create", "delete"}, validDrain{}}
}

// ConfigValidators of the nodemaintenance_operator resource.
func (r *OperatorResource) ConfigValidators(context.Context) []resource.ConfigValidator {
	return []resource.ConfigValidator{positiveTimeouts{"create", "update", "delete"}}
}

// Validators wired into the schemas; named here so the schema files need no
// validator imports.
var (
	nodeNameValidators        = []validator.String{kubernetesName{"node"}}
	maintenanceNameValidators = []validator.String{kubernetesName{"NodeMaintenance"}}
	reasonValidators          = []validator.String{reasonLength{}}
	namespaceValidators       = []validator.String{namespaceName{}}
	quantityValidators        = []validator.String{quantity{}}
	maxUnavailableValidators  = []validator.String{maxUnavailable{}}
	// maxUnavailablePolicyValidators: the values --max-unavailable-policy accepts.
	maxUnavailablePolicyValidators = []validator.String{stringvalidator.OneOf(nmvalidation.MaxUnavailablePolicies...)}
	replicasValidators             = []validator.Int64{int64validator.AtLeast(0)}
	webhookURLValidators           = []validator.String{stringvalidator.AlsoRequires(path.MatchRoot("webhook_ca_bundle"))}
	webhookCAValidators            = []validator.String{stringvalidator.AlsoRequires(path.MatchRoot("webhook_url"))}
)

// kubernetesName accepts a DNS-1123 subdomain: the name of a Node or of a
// NodeMaintenance (what `kubectl get nodes` shows).
type kubernetesName struct{ what string }

func (v kubernetesName) Description(context.Context) string {
	return fmt.Sprintf("must be the name of a %s: 1 to %d lowercase letters, digits, '-' and '.', starting and ending with a letter or digit",
		v.what, nmvalidation.MaxNameLength)
}

func (v kubernetesName) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v kubernetesName) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	name := req.ConfigValue.ValueString()
	switch n := len(name); {
	case n == 0:
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid "+titleCase(v.what)+" Name",
			fmt.Sprintf("%s is empty. Set it to the name of a %s, as `kubectl get nodes` or `kubectl get nm` shows it.", req.Path, v.what))
	case n > nmvalidation.MaxNameLength:
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid "+titleCase(v.what)+" Name",
			fmt.Sprintf("%s is %d characters long; the name of a %s has at most %d.",
				req.Path, n, v.what, nmvalidation.MaxNameLength))
	default:
		if errs := nmvalidation.NameProblems(name); len(errs) > 0 {
			resp.Diagnostics.AddAttributeError(req.Path, "Invalid "+titleCase(v.what)+" Name",
				fmt.Sprintf("%s %q is not a valid %s name: %s.", req.Path, name, v.what, strings.Join(errs, "; ")))
		}
	}
}

// namespaceName accepts a DNS-1123 label, the name of a Namespace.
type namespaceName struct{}

func (namespaceName) Description(context.Context) string {
	return fmt.Sprintf("must be a namespace name: 1 to %d lowercase letters, digits and '-', starting and ending with a letter or digit",
		validation.DNS1123LabelMaxLength)
}

func (v namespaceName) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (namespaceName) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	name := req.ConfigValue.ValueString()
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Namespace Name",
			fmt.Sprintf("%s %q is not a valid namespace name: %s.", req.Path, name, strings.Join(errs, "; ")))
	}
}

// reasonLength bounds the reason as the CRD does: in characters, not bytes,
// so that 1024 characters of Chinese fit as well as 1024 of English.
type reasonLength struct{}

func (reasonLength) Description(context.Context) string {
	return fmt.Sprintf("must be at most %d characters", nmv1beta1.MaxReasonLength)
}

func (v reasonLength) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (reasonLength) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if n := utf8.RuneCountInString(req.ConfigValue.ValueString()); n > nmv1beta1.MaxReasonLength {
		resp.Diagnostics.AddAttributeError(req.Path, "Reason Too Long",
			fmt.Sprintf("%s is %d characters long; a NodeMaintenance reason has at most %d characters. Shorten it, "+
				"for example to a ticket number and a summary.", req.Path, n, nmv1beta1.MaxReasonLength))
	}
}

// quantity accepts a non-negative Kubernetes quantity such as 100m or 128Mi.
type quantity struct{}

func (quantity) Description(context.Context) string {
	return "must be a Kubernetes quantity, such as 100m (CPU) or 128Mi (memory)"
}

func (v quantity) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (quantity) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	q, err := k8sresource.ParseQuantity(s)
	switch {
	case err != nil:
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Quantity",
			fmt.Sprintf("%s %q is not a Kubernetes quantity (like 100m for CPU or 128Mi for memory): %v.", req.Path, s, err))
	case q.Sign() < 0:
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Quantity",
			fmt.Sprintf("%s %q is negative; container requests and limits must be zero or more.", req.Path, s))
	}
}

// maxUnavailable accepts what the operator's --max-unavailable accepts
// (nmvalidation.ParseMaxUnavailable): a count of nodes or a percentage,
// neither negative.
type maxUnavailable struct{}

func (maxUnavailable) Description(context.Context) string {
	return "must be a number of nodes (2) or a percentage of all nodes (20%), not negative"
}

func (v maxUnavailable) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (maxUnavailable) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	if _, err := nmvalidation.ParseMaxUnavailable(s); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Max Unavailable",
			fmt.Sprintf("%s %q is not a number of nodes (like \"2\") or a percentage of all nodes (like \"20%%\"), zero or more. "+
				"The operator would refuse to start with it.", req.Path, s))
	}
}

// positiveTimeouts refuses a zero or negative duration in the timeouts
// block. The timeouts package accepts any Go duration ("-1.5h" among its
// examples), and a wait that has already expired gives up right after the
// change is made.
type positiveTimeouts []string

func (positiveTimeouts) Description(context.Context) string {
	return "timeouts must be positive durations"
}

func (v positiveTimeouts) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v positiveTimeouts) ValidateResource(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	for _, name := range v {
		p := path.Root("timeouts").AtName(name)
		var s types.String
		if diags := req.Config.GetAttribute(ctx, p, &s); diags.HasError() || s.IsNull() || s.IsUnknown() {
			continue
		}
		d, err := time.ParseDuration(s.ValueString())
		if err != nil || d > 0 {
			// Unparseable durations are reported by the timeouts package.
			continue
		}
		resp.Diagnostics.AddAttributeError(p, "Invalid Timeout",
			fmt.Sprintf("%s is %q, which is not a positive duration: the provider would stop waiting as soon as it started. "+
				"Use a duration such as \"20m\", or remove it for the default.", p, s.ValueString()))
	}
}

// atMostOneExec refuses a second exec block: there is one credential
// plugin, and the blocks after the first would be ignored. The check is
// listvalidator.SizeAtMost(1), run here rather than in the block's
// Validators because the Pulumi bridge reads a list block bounded there to
// one element as a single object, which would rename the Pulumi provider's
// `execs` array input to `exec`.
type atMostOneExec struct{}

func (atMostOneExec) Description(ctx context.Context) string {
	return "exec: " + listvalidator.SizeAtMost(1).Description(ctx)
}

func (v atMostOneExec) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (atMostOneExec) ValidateProvider(ctx context.Context, req provider.ValidateConfigRequest, resp *provider.ValidateConfigResponse) {
	p := path.Root("exec")
	var exec types.List
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, p, &exec)...)
	if resp.Diagnostics.HasError() {
		return
	}
	listResp := &validator.ListResponse{}
	listvalidator.SizeAtMost(1).ValidateList(ctx, validator.ListRequest{Path: p, PathExpression: p.Expression(), Config: req.Config, ConfigValue: exec}, listResp)
	resp.Diagnostics.Append(listResp.Diagnostics...)
}

func titleCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// labelSelector accepts a label selector as kubectl's -l takes it
// (parseSelector).
type labelSelector struct{}

func (labelSelector) Description(context.Context) string {
	return "must be a label selector as kubectl -l takes it, e.g. pool=blue,zone!=a"
}

func (v labelSelector) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (labelSelector) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	if strings.TrimSpace(s) == "" {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Label Selector",
			fmt.Sprintf("%s is empty, which would select every node. Name the nodes' label, e.g. pool=blue.", req.Path))
		return
	}
	if _, err := parseSelector(s); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Label Selector",
			fmt.Sprintf("%s %q is not a label selector as kubectl -l takes it (e.g. pool=blue,zone!=a): %v", req.Path, s, err))
	}
}

// rolloutMaxUnavailable accepts what reads as a rollout's max_unavailable: a
// count or a percentage. Its bounds are the API's rule (validRollout).
type rolloutMaxUnavailable struct{}

func (rolloutMaxUnavailable) Description(context.Context) string {
	return "must be a number of nodes (3) or a percentage of the set (30%)"
}

func (v rolloutMaxUnavailable) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (rolloutMaxUnavailable) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := nmvalidation.ParseMaxUnavailable(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Max Unavailable", maxUnavailableProblem(req.ConfigValue.ValueString()))
	}
}

// jobTemplate accepts a step's job_template (parseJobTemplate).
type jobTemplate struct{}

func (jobTemplate) Description(context.Context) string {
	return "must be a batch/v1 JobTemplateSpec in YAML or JSON"
}

func (v jobTemplate) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (jobTemplate) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := parseJobTemplate(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Step Job Template", err.Error())
	}
}

// positiveDuration validates a Go duration above zero, or at least zero
// with orZero (a hold or soak that may be left out as well as be 0s).
type positiveDuration struct{ orZero bool }

func (v positiveDuration) Description(context.Context) string {
	if v.orZero {
		return "a Go duration of zero or more, e.g. 0s, 30m or 1h30m"
	}
	return "a positive Go duration, e.g. 30m or 1h30m"
}

func (v positiveDuration) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v positiveDuration) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	d, err := time.ParseDuration(req.ConfigValue.ValueString())
	switch {
	case err != nil:
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Duration", fmt.Sprintf("%q is not a Go duration (e.g. 30m, 1h30m): %v", req.ConfigValue.ValueString(), err))
	case d < 0 && v.orZero:
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Duration", fmt.Sprintf("%s %q is negative; use 0s or more, or leave it out", req.Path, req.ConfigValue.ValueString()))
	case d <= 0 && !v.orZero:
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Duration", fmt.Sprintf("%q must be positive", req.ConfigValue.ValueString()))
	}
}
