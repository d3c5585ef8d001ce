package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	actschema "github.com/hashicorp/terraform-plugin-framework/action/schema"
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
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
)

// drainBlockDescription introduces the drain block wherever it is used.
const drainBlockDescription = "How the operator drains the node (`spec.drain`, see the drain policy guide). Without it, every pod " +
	"`kubectl drain --ignore-daemonsets --delete-emptydir-data --force` would evict is evicted and the drain waits as long as " +
	"it takes (the `create` timeout bounds only the apply)."

// drainFields are the drain block's attributes, one row for each field of
// spec.drain. The rows generate the resource's and the drain preview's
// schemas (so the two blocks cannot drift apart), the block's types, the
// conversions both ways and the renaming of spec.drain errors: a new field of
// DrainPolicy is one row here.
var drainFields = []drainField{
	durationField("timeout", "timeout",
		"How long the operator tries to drain, from the cordon, as a Go duration (`30m`, `1h30m`); then "+
			"`on_timeout` applies. Keep it below the `create` timeout, so that the operator's outcome, not the apply's wait, ends the apply.",
		func(p *nmv1beta1.DrainPolicy) **metav1.Duration { return &p.Timeout }),
	stringField("on_timeout", "onTimeout",
		"What happens at the timeout: `Fail` (the default: apply fails, the node stays cordoned, and the "+
			"resource is kept tainted so that destroy restores it), `Restore` (the operator restores the node at once; apply fails, "+
			"the NodeMaintenance is deleted and the resource is not kept, so the next apply tries again) or `Force` (the pods left "+
			"are deleted past their PodDisruptionBudgets and the drain finishes; needs `allow_force_drain` on the operator).",
		[]validator.String{stringvalidator.OneOf(string(nmv1beta1.DrainTimeoutFail), string(nmv1beta1.DrainTimeoutRestore), string(nmv1beta1.DrainTimeoutForce))},
		func(p *nmv1beta1.DrainPolicy) *nmv1beta1.DrainTimeoutAction { return &p.OnTimeout }),
	selectorField("pod_selector", "podSelector",
		"Only the pods this label selector matches are evicted, as `kubectl drain --pod-selector` "+
			"(e.g. `tier=batch,env!=prod`); the others stay on the node.",
		func(p *nmv1beta1.DrainPolicy) **metav1.LabelSelector { return &p.PodSelector }),
	int64Field("grace_period_seconds", "gracePeriodSeconds",
		"Overrides each evicted pod's termination grace period, as `kubectl drain --grace-period`; without it each pod gets its own.",
		[]validator.Int64{int64validator.AtLeast(0)},
		func(p *nmv1beta1.DrainPolicy) **int64 { return &p.GracePeriodSeconds }),
	durationField("skip_wait_for_delete_timeout", "skipWaitForDeleteTimeout",
		"On a node that is not Ready, a pod whose deletion was due longer ago than this Go duration counts as "+
			"gone, as `kubectl drain --skip-wait-for-delete-timeout`, so that the maintenance of a dead node can finish.",
		func(p *nmv1beta1.DrainPolicy) **metav1.Duration { return &p.SkipWaitForDeleteTimeout }),
	optionalBoolField("delete_empty_dir_data", "deleteEmptyDirData",
		"Whether pods with `emptyDir` volumes are evicted, their data lost: `true` when left out, as `kubectl drain "+
			"--delete-emptydir-data`. `false` leaves the running ones on the node, as `kubectl drain` without the flag: the drain "+
			"waits for them and says why (`last_error`), until they are deleted by other means or `timeout` applies.",
		func(p *nmv1beta1.DrainPolicy) **bool { return &p.DeleteEmptyDirData }),
	boolField("allow_control_plane_node", "allowControlPlaneNode",
		"Allows the maintenance of a control-plane node (labelled `node-role.kubernetes.io/control-plane`), "+
			"which is refused without it: draining one takes a member of the control plane away.",
		func(p *nmv1beta1.DrainPolicy) *bool { return &p.AllowControlPlaneNode }),
	boolField("allow_last_schedulable_node", "allowLastSchedulableNode",
		"Allows the maintenance of the last schedulable node of the cluster (no other node is Ready, "+
			"uncordoned and free of `NoSchedule`/`NoExecute` taints), which is refused without it: the evicted pods would have nowhere to go.",
		func(p *nmv1beta1.DrainPolicy) *bool { return &p.AllowLastSchedulableNode }),
}

// drainField is one attribute of the drain block: its Terraform name, the
// name of its field in spec.drain (the JSON name, as API errors quote it),
// its type, its schema (description and validators) in the resource, in a
// data source and in an action, and how it is written to and read from the
// DrainPolicy.
// The constructors below build each kind.
type drainField struct {
	name, spec string
	typ        attr.Type
	resource   schema.Attribute
	dataSource dsschema.Attribute
	action     actschema.Attribute
	// toSpec sets the field from a known, non-null value of the block;
	// errors are attribute errors at at.
	toSpec func(v attr.Value, p *nmv1beta1.DrainPolicy, at path.Path) diag.Diagnostics
	// fromSpec is the field's value in the block; null when it is not set.
	fromSpec func(p *nmv1beta1.DrainPolicy) attr.Value
}

// stringRow is what every string attribute shares: its type and schemas.
func stringRow(name, spec, desc string, validators []validator.String) drainField {
	return drainField{name: name, spec: spec, typ: types.StringType,
		resource:   schema.StringAttribute{Optional: true, MarkdownDescription: desc, Validators: validators},
		dataSource: dsschema.StringAttribute{Optional: true, MarkdownDescription: desc, Validators: validators},
		action:     actschema.StringAttribute{Optional: true, MarkdownDescription: desc, Validators: validators},
	}
}

// durationField is a Go duration (`30m`), written back as Duration.String.
func durationField(name, spec, desc string, field func(*nmv1beta1.DrainPolicy) **metav1.Duration) drainField {
	f := stringRow(name, spec, desc, []validator.String{positiveDuration{}})
	f.toSpec = func(v attr.Value, p *nmv1beta1.DrainPolicy, at path.Path) diag.Diagnostics {
		s := v.(types.String).ValueString()
		d, err := time.ParseDuration(s)
		if err != nil {
			*field(p) = nil
			return diag.Diagnostics{diag.NewAttributeErrorDiagnostic(at, "Invalid Duration", fmt.Sprintf("%q is not a Go duration (e.g. 30m): %v", s, err))}
		}
		*field(p) = &metav1.Duration{Duration: d}
		return nil
	}
	f.fromSpec = func(p *nmv1beta1.DrainPolicy) attr.Value {
		if d := *field(p); d != nil {
			return types.StringValue(d.Duration.String())
		}
		return types.StringNull()
	}
	return f
}

// stringField is a string, or a string type such as DrainTimeoutAction;
// empty in spec.drain is null in the block.
func stringField[S ~string](name, spec, desc string, validators []validator.String, field func(*nmv1beta1.DrainPolicy) *S) drainField {
	f := stringRow(name, spec, desc, validators)
	f.toSpec = func(v attr.Value, p *nmv1beta1.DrainPolicy, _ path.Path) diag.Diagnostics {
		*field(p) = S(v.(types.String).ValueString())
		return nil
	}
	f.fromSpec = func(p *nmv1beta1.DrainPolicy) attr.Value {
		if s := *field(p); s != "" {
			return types.StringValue(string(s))
		}
		return types.StringNull()
	}
	return f
}

// selectorField is a label selector as kubectl's `-l` takes it.
func selectorField(name, spec, desc string, field func(*nmv1beta1.DrainPolicy) **metav1.LabelSelector) drainField {
	f := stringRow(name, spec, desc, nil)
	f.toSpec = func(v attr.Value, p *nmv1beta1.DrainPolicy, at path.Path) diag.Diagnostics {
		s := v.(types.String).ValueString()
		sel, err := parseSelector(s)
		*field(p) = sel
		if err != nil {
			return diag.Diagnostics{diag.NewAttributeErrorDiagnostic(at, "Invalid Label Selector",
				fmt.Sprintf("%q is not a label selector as kubectl -l takes it (e.g. tier=batch,env!=prod): %v", s, err))}
		}
		return nil
	}
	f.fromSpec = func(p *nmv1beta1.DrainPolicy) attr.Value {
		if sel := *field(p); sel != nil {
			return types.StringValue(metav1.FormatLabelSelector(sel))
		}
		return types.StringNull()
	}
	return f
}

// parseSelector parses a label selector as kubectl's -l takes it, into a
// LabelSelector. metav1.ParseToLabelSelector refuses `key!=value`, which
// kubectl accepts: it is `key notin (value)`, which matches the same pods
// (those without the key too).
func parseSelector(s string) (*metav1.LabelSelector, error) {
	reqs, err := labels.ParseToRequirements(s)
	if err != nil {
		return nil, err
	}
	var notEquals []metav1.LabelSelectorRequirement
	var rest []string
	for _, r := range reqs {
		if r.Operator() == selection.NotEquals {
			notEquals = append(notEquals, metav1.LabelSelectorRequirement{Key: r.Key(), Operator: metav1.LabelSelectorOpNotIn, Values: r.ValuesUnsorted()})
			continue
		}
		rest = append(rest, r.String())
	}
	sel, err := metav1.ParseToLabelSelector(strings.Join(rest, ","))
	if err != nil {
		return nil, err
	}
	sel.MatchExpressions = append(sel.MatchExpressions, notEquals...)
	return sel, nil
}

// int64Field is an optional integer (nil in spec.drain when not set).
func int64Field(name, spec, desc string, validators []validator.Int64, field func(*nmv1beta1.DrainPolicy) **int64) drainField {
	return drainField{name: name, spec: spec, typ: types.Int64Type,
		resource:   schema.Int64Attribute{Optional: true, MarkdownDescription: desc, Validators: validators},
		dataSource: dsschema.Int64Attribute{Optional: true, MarkdownDescription: desc, Validators: validators},
		action:     actschema.Int64Attribute{Optional: true, MarkdownDescription: desc, Validators: validators},
		toSpec: func(v attr.Value, p *nmv1beta1.DrainPolicy, _ path.Path) diag.Diagnostics {
			*field(p) = v.(types.Int64).ValueInt64Pointer()
			return nil
		},
		fromSpec: func(p *nmv1beta1.DrainPolicy) attr.Value { return types.Int64PointerValue(*field(p)) },
	}
}

// boolField is a flag: false in spec.drain is null in the block (see flag).
func boolField(name, spec, desc string, field func(*nmv1beta1.DrainPolicy) *bool) drainField {
	return drainField{name: name, spec: spec, typ: types.BoolType,
		resource:   schema.BoolAttribute{Optional: true, MarkdownDescription: desc},
		dataSource: dsschema.BoolAttribute{Optional: true, MarkdownDescription: desc},
		action:     actschema.BoolAttribute{Optional: true, MarkdownDescription: desc},
		toSpec: func(v attr.Value, p *nmv1beta1.DrainPolicy, _ path.Path) diag.Diagnostics {
			*field(p) = v.(types.Bool).ValueBool()
			return nil
		},
		fromSpec: func(p *nmv1beta1.DrainPolicy) attr.Value { return flag(*field(p)) },
	}
}

// optionalBoolField is a boolean whose absence means its default (nil in
// spec.drain, null in the block): unlike a flag, false is written.
func optionalBoolField(name, spec, desc string, field func(*nmv1beta1.DrainPolicy) **bool) drainField {
	return drainField{name: name, spec: spec, typ: types.BoolType,
		resource:   schema.BoolAttribute{Optional: true, MarkdownDescription: desc},
		dataSource: dsschema.BoolAttribute{Optional: true, MarkdownDescription: desc},
		action:     actschema.BoolAttribute{Optional: true, MarkdownDescription: desc},
		toSpec: func(v attr.Value, p *nmv1beta1.DrainPolicy, _ path.Path) diag.Diagnostics {
			*field(p) = v.(types.Bool).ValueBoolPointer()
			return nil
		},
		fromSpec: func(p *nmv1beta1.DrainPolicy) attr.Value { return types.BoolPointerValue(*field(p)) },
	}
}

// flag is a drain block boolean: true, or null (not written) for false.
func flag(b bool) types.Bool {
	if b {
		return types.BoolValue(true)
	}
	return types.BoolNull()
}

// drainAttrTypes are the drain block's attribute types, from drainFields.
var drainAttrTypes = func() map[string]attr.Type {
	out := make(map[string]attr.Type, len(drainFields))
	for _, f := range drainFields {
		out[f.name] = f.typ
	}
	return out
}()

// drainAttribute is the drain block's schema. Every field is immutable:
// changing one replaces the maintenance (the node is restored, then drained
// again under the new policy).
func drainAttribute() schema.Attribute {
	attrs := make(map[string]schema.Attribute, len(drainFields))
	for _, f := range drainFields {
		attrs[f.name] = f.resource
	}
	return schema.SingleNestedAttribute{Optional: true,
		MarkdownDescription: drainBlockDescription + " Changing it replaces the resource.",
		PlanModifiers:       []planmodifier.Object{objectplanmodifier.RequiresReplace()},
		Attributes:          attrs,
	}
}

// drainDataSourceAttribute is the same block in a data source's schema.
func drainDataSourceAttribute(description string) dsschema.Attribute {
	attrs := make(map[string]dsschema.Attribute, len(drainFields))
	for _, f := range drainFields {
		attrs[f.name] = f.dataSource
	}
	return dsschema.SingleNestedAttribute{Optional: true, MarkdownDescription: description, Attributes: attrs}
}

// drainActionAttribute is the same block in an action's schema.
func drainActionAttribute(description string) actschema.Attribute {
	attrs := make(map[string]actschema.Attribute, len(drainFields))
	for _, f := range drainFields {
		attrs[f.name] = f.action
	}
	return actschema.SingleNestedAttribute{Optional: true, MarkdownDescription: description, Attributes: attrs}
}

// drainPolicy turns the drain block into spec.drain; nil without a block.
// Null and unknown attributes leave their field unset.
func drainPolicy(ctx context.Context, block types.Object) (*nmv1beta1.DrainPolicy, diag.Diagnostics) {
	if block.IsNull() || block.IsUnknown() {
		return nil, nil
	}
	// The rows read their values by type: a block of another shape (which
	// the schemas built from drainFields cannot produce) is refused first.
	if want := (types.ObjectType{AttrTypes: drainAttrTypes}); !block.Type(ctx).Equal(want) {
		var diags diag.Diagnostics
		diags.AddAttributeError(path.Root("drain"), "Invalid Drain Block",
			fmt.Sprintf("The drain block is a %s, not the %s the provider reads. This is a bug in the provider; please report it.", block.Type(ctx), want))
		return nil, diags
	}
	var diags diag.Diagnostics
	p := &nmv1beta1.DrainPolicy{}
	values := block.Attributes()
	for _, f := range drainFields {
		if v := values[f.name]; !v.IsNull() && !v.IsUnknown() {
			diags.Append(f.toSpec(v, p, path.Root("drain").AtName(f.name))...)
		}
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
	values := make(map[string]attr.Value, len(drainFields))
	for _, f := range drainFields {
		values[f.name] = f.fromSpec(p)
	}
	return types.ObjectValue(drainAttrTypes, values)
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
	checkDrainBlock(ctx, block, &resp.Diagnostics)
}

// checkDrainBlock adds what the webhook would refuse in the drain block to
// diags, at the block's path.
func checkDrainBlock(ctx context.Context, block types.Object, diags *diag.Diagnostics) {
	p, d := drainPolicy(ctx, block)
	diags.Append(d...)
	if d.HasError() || p == nil {
		return
	}
	if err := validation.ValidateDrain(p, true); err != nil {
		diags.AddAttributeError(path.Root("drain"), "Invalid Drain Policy", terraformNames(err.Error()))
	}
}

// terraformNames words an error about spec.drain (a NodeMaintenance's or a
// rollout's) or a rollout's spec in the resources' names.
func terraformNames(msg string) string { return rolloutTerraformNames(drainNames.Replace(msg)) }

// drainNames renames spec.drain.<spec> to drain.<name> for every row. At one
// position strings.Replacer takes the first old string that matches, so the
// longer names go first: spec.drain.timeoutX must not become drain.timeoutX.
var drainNames = func() *strings.Replacer {
	fields := slices.Clone(drainFields)
	slices.SortStableFunc(fields, func(a, b drainField) int { return len(b.spec) - len(a.spec) })
	pairs := make([]string, 0, 2*len(fields))
	for _, f := range fields {
		pairs = append(pairs, "spec.drain."+f.spec, "drain."+f.name)
	}
	return strings.NewReplacer(pairs...)
}()
