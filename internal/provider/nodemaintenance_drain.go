package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	dsschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
)

// drainModel is the drain block: spec.drain in Terraform's names, durations
// as Go durations and the pod selector as kubectl's `-l` takes it.
type drainModel struct {
	Timeout                  types.String `tfsdk:"timeout"`
	OnTimeout                types.String `tfsdk:"on_timeout"`
	PodSelector              types.String `tfsdk:"pod_selector"`
	GracePeriodSeconds       types.Int64  `tfsdk:"grace_period_seconds"`
	SkipWaitForDeleteTimeout types.String `tfsdk:"skip_wait_for_delete_timeout"`
	AllowControlPlaneNode    types.Bool   `tfsdk:"allow_control_plane_node"`
	AllowLastSchedulableNode types.Bool   `tfsdk:"allow_last_schedulable_node"`
}

// drainAttrTypes are the drain block's attribute types, from drainFields.
var drainAttrTypes = func() map[string]attr.Type {
	out := map[string]attr.Type{}
	for _, f := range drainFields {
		switch {
		case f.boolean:
			out[f.name] = types.BoolType
		case f.int:
			out[f.name] = types.Int64Type
		default:
			out[f.name] = types.StringType
		}
	}
	return out
}()

// drainBlockDescription introduces the drain block wherever it is used.
const drainBlockDescription = "How the operator drains the node (`spec.drain`, see the drain policy guide). Without it, every pod " +
	"`kubectl drain --ignore-daemonsets --delete-emptydir-data --force` would evict is evicted and the drain waits as long as " +
	"it takes (the `create` timeout bounds only the apply)."

// drainField is one attribute of the drain block. The resource and the
// drain preview data source build their schemas from drainFields, so the two
// blocks cannot drift apart and drainPolicy reads either.
type drainField struct {
	name, description string
	int, boolean      bool
	strings           []validator.String
	ints              []validator.Int64
}

var drainFields = []drainField{
	{name: "timeout", strings: []validator.String{positiveDuration{}},
		description: "How long the operator tries to drain, from the cordon, as a Go duration (`30m`, `1h30m`); then " +
			"`on_timeout` applies. Keep it below the `create` timeout, so that the operator's outcome, not the apply's wait, ends the apply."},
	{name: "on_timeout", strings: []validator.String{stringvalidator.OneOf(string(nmv1beta1.DrainTimeoutFail), string(nmv1beta1.DrainTimeoutRestore), string(nmv1beta1.DrainTimeoutForce))},
		description: "What happens at the timeout: `Fail` (the default: apply fails, the node stays cordoned, and the " +
			"resource is kept tainted so that destroy restores it), `Restore` (the operator restores the node at once; apply fails, " +
			"the NodeMaintenance is deleted and the resource is not kept, so the next apply tries again) or `Force` (the pods left " +
			"are deleted past their PodDisruptionBudgets and the drain finishes; needs `allow_force_drain` on the operator)."},
	{name: "pod_selector",
		description: "Only the pods this label selector matches are evicted, as `kubectl drain --pod-selector` " +
			"(e.g. `tier=batch,env!=prod`); the others stay on the node."},
	{name: "grace_period_seconds", int: true, ints: []validator.Int64{int64validator.AtLeast(0)},
		description: "Overrides each evicted pod's termination grace period, as `kubectl drain --grace-period`; without it each pod gets its own."},
	{name: "skip_wait_for_delete_timeout", strings: []validator.String{positiveDuration{}},
		description: "On a node that is not Ready, a pod whose deletion was due longer ago than this Go duration counts as " +
			"gone, as `kubectl drain --skip-wait-for-delete-timeout`, so that the maintenance of a dead node can finish."},
	{name: "allow_control_plane_node", boolean: true,
		description: "Allows the maintenance of a control-plane node (labelled `node-role.kubernetes.io/control-plane`), " +
			"which is refused without it: draining one takes a member of the control plane away."},
	{name: "allow_last_schedulable_node", boolean: true,
		description: "Allows the maintenance of the last schedulable node of the cluster (no other node is Ready, " +
			"uncordoned and free of `NoSchedule`/`NoExecute` taints), which is refused without it: the evicted pods would have nowhere to go."},
}

// drainAttribute is the drain block's schema. Every field is immutable:
// changing one replaces the maintenance (the node is restored, then drained
// again under the new policy).
func drainAttribute() schema.Attribute {
	attrs := map[string]schema.Attribute{}
	for _, f := range drainFields {
		switch {
		case f.boolean:
			attrs[f.name] = schema.BoolAttribute{Optional: true, MarkdownDescription: f.description}
		case f.int:
			attrs[f.name] = schema.Int64Attribute{Optional: true, MarkdownDescription: f.description, Validators: f.ints}
		default:
			attrs[f.name] = schema.StringAttribute{Optional: true, MarkdownDescription: f.description, Validators: f.strings}
		}
	}
	return schema.SingleNestedAttribute{Optional: true,
		MarkdownDescription: drainBlockDescription + " Changing it replaces the resource.",
		PlanModifiers:       []planmodifier.Object{objectplanmodifier.RequiresReplace()},
		Attributes:          attrs,
	}
}

// drainDataSourceAttribute is the same block in a data source's schema.
func drainDataSourceAttribute(description string) dsschema.Attribute {
	attrs := map[string]dsschema.Attribute{}
	for _, f := range drainFields {
		switch {
		case f.boolean:
			attrs[f.name] = dsschema.BoolAttribute{Optional: true, MarkdownDescription: f.description}
		case f.int:
			attrs[f.name] = dsschema.Int64Attribute{Optional: true, MarkdownDescription: f.description, Validators: f.ints}
		default:
			attrs[f.name] = dsschema.StringAttribute{Optional: true, MarkdownDescription: f.description, Validators: f.strings}
		}
	}
	return dsschema.SingleNestedAttribute{Optional: true, MarkdownDescription: description, Attributes: attrs}
}

// drainPolicy turns the drain block into spec.drain; nil without a block.
func drainPolicy(ctx context.Context, block types.Object) (*nmv1beta1.DrainPolicy, diag.Diagnostics) {
	if block.IsNull() || block.IsUnknown() {
		return nil, nil
	}
	var m drainModel
	diags := block.As(ctx, &m, basetypes.ObjectAsOptions{})
	if diags.HasError() {
		return nil, diags
	}
	p := &nmv1beta1.DrainPolicy{
		OnTimeout:                nmv1beta1.DrainTimeoutAction(m.OnTimeout.ValueString()),
		AllowControlPlaneNode:    m.AllowControlPlaneNode.ValueBool(),
		AllowLastSchedulableNode: m.AllowLastSchedulableNode.ValueBool(),
	}
	duration := func(v types.String, name string) *metav1.Duration {
		if v.IsNull() || v.IsUnknown() {
			return nil
		}
		d, err := time.ParseDuration(v.ValueString())
		if err != nil {
			diags.AddAttributeError(path.Root("drain").AtName(name), "Invalid Duration", fmt.Sprintf("%q is not a Go duration (e.g. 30m): %v", v.ValueString(), err))
			return nil
		}
		return &metav1.Duration{Duration: d}
	}
	p.Timeout = duration(m.Timeout, "timeout")
	p.SkipWaitForDeleteTimeout = duration(m.SkipWaitForDeleteTimeout, "skip_wait_for_delete_timeout")
	if !m.GracePeriodSeconds.IsNull() && !m.GracePeriodSeconds.IsUnknown() {
		p.GracePeriodSeconds = m.GracePeriodSeconds.ValueInt64Pointer()
	}
	if s := m.PodSelector.ValueString(); !m.PodSelector.IsNull() && !m.PodSelector.IsUnknown() {
		sel, err := metav1.ParseToLabelSelector(s)
		if err != nil {
			diags.AddAttributeError(path.Root("drain").AtName("pod_selector"), "Invalid Label Selector",
				fmt.Sprintf("%q is not a label selector as kubectl -l takes it (e.g. tier=batch,env!=prod): %v", s, err))
		}
		p.PodSelector = sel
	}
	return p, diags
}

// drainBlock is spec.drain as the drain block. prior is the block in the
// state or plan: when it says the same (30m and 30m0s), it is kept as
// written, so that a refresh shows no change.
func drainBlock(ctx context.Context, p *nmv1beta1.DrainPolicy, prior types.Object) (types.Object, diag.Diagnostics) {
	if was, diags := drainPolicy(ctx, prior); !diags.HasError() && equality.Semantic.DeepEqual(was, p) {
		return prior, nil
	}
	if p == nil {
		return types.ObjectNull(drainAttrTypes), nil
	}
	str := func(d *metav1.Duration) types.String {
		if d == nil {
			return types.StringNull()
		}
		return types.StringValue(d.Duration.String())
	}
	values := map[string]attr.Value{
		"timeout": str(p.Timeout), "on_timeout": types.StringNull(), "pod_selector": types.StringNull(),
		"grace_period_seconds": types.Int64PointerValue(p.GracePeriodSeconds), "skip_wait_for_delete_timeout": str(p.SkipWaitForDeleteTimeout),
		"allow_control_plane_node": flag(p.AllowControlPlaneNode), "allow_last_schedulable_node": flag(p.AllowLastSchedulableNode),
	}
	if p.OnTimeout != "" {
		values["on_timeout"] = types.StringValue(string(p.OnTimeout))
	}
	if p.PodSelector != nil {
		values["pod_selector"] = types.StringValue(metav1.FormatLabelSelector(p.PodSelector))
	}
	return types.ObjectValue(drainAttrTypes, values)
}

// flag is a drain block boolean: true, or null (not written) for false.
func flag(b bool) types.Bool {
	if b {
		return types.BoolValue(true)
	}
	return types.BoolNull()
}

// validDrain checks the drain block at plan time with the rules the webhook
// applies (api/v1beta1/validation). Whether Force is allowed depends on the
// installation, which the webhook knows: it is not checked here.
type validDrain struct{}

func (validDrain) Description(context.Context) string {
	return "the drain block follows the rules of spec.drain (e.g. on_timeout needs timeout)"
}

func (v validDrain) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (validDrain) ValidateResource(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var block types.Object
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("drain"), &block)...)
	if resp.Diagnostics.HasError() {
		return
	}
	p, diags := drainPolicy(ctx, block)
	resp.Diagnostics.Append(diags...)
	if diags.HasError() || p == nil {
		return
	}
	if err := validation.ValidateDrain(p, true); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("drain"), "Invalid Drain Policy", terraformNames(err.Error()))
	}
}

// terraformNames words a spec.drain error in the drain block's names.
func terraformNames(msg string) string {
	return strings.NewReplacer(
		"spec.drain.onTimeout", "drain.on_timeout", "spec.drain.timeout", "drain.timeout", "spec.drain.podSelector", "drain.pod_selector",
		"spec.drain.gracePeriodSeconds", "drain.grace_period_seconds", "spec.drain.skipWaitForDeleteTimeout", "drain.skip_wait_for_delete_timeout",
		"spec.drain.allowControlPlaneNode", "drain.allow_control_plane_node", "spec.drain.allowLastSchedulableNode", "drain.allow_last_schedulable_node",
	).Replace(msg)
}

// positiveDuration validates a Go duration above zero.
type positiveDuration struct{}

func (positiveDuration) Description(context.Context) string {
	return "a positive Go duration, e.g. 30m or 1h30m"
}

func (v positiveDuration) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (positiveDuration) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	d, err := time.ParseDuration(req.ConfigValue.ValueString())
	switch {
	case err != nil:
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Duration", fmt.Sprintf("%q is not a Go duration (e.g. 30m, 1h30m): %v", req.ConfigValue.ValueString(), err))
	case d <= 0:
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Duration", fmt.Sprintf("%q must be positive", req.ConfigValue.ValueString()))
	}
}
