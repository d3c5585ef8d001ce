package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	dschema "github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// statusModel is the NodeMaintenance status in Terraform's snake_case names,
// shared by the resource and the data sources. The framework reads and
// writes models through struct tags, so the fields are here; everything
// else about an attribute (its type, description, schemas and how it is read
// from the CR) is in statusAttributes, and statusFrom fills this struct from
// that table: a field missing on either side fails every conversion.
type statusModel struct {
	Phase             types.String `tfsdk:"phase"`
	DrainProgress     types.Int64  `tfsdk:"drain_progress"`
	PendingPods       types.List   `tfsdk:"pending_pods"`
	PendingPodsRefs   types.List   `tfsdk:"pending_pods_refs"`
	TotalPods         types.Int64  `tfsdk:"total_pods"`
	EvictionPods      types.Int64  `tfsdk:"eviction_pods"`
	LastError         types.String `tfsdk:"last_error"`
	ErrorOnLeaseCount types.Int64  `tfsdk:"error_on_lease_count"`
	LastUpdate        types.String `tfsdk:"last_update"`
	Conditions        types.List   `tfsdk:"conditions"`
}

var podRefType = types.ObjectType{AttrTypes: map[string]attr.Type{"namespace": types.StringType, "name": types.StringType}}

var conditionType = types.ObjectType{AttrTypes: map[string]attr.Type{
	"type": types.StringType, "status": types.StringType, "reason": types.StringType, "message": types.StringType, "last_transition_time": types.StringType,
}}

// statusAttributes are the status attributes of the resource and the data
// sources, in the order of NodeMaintenanceStatus.
var statusAttributes = statusTable[nmv1beta1.NodeMaintenanceStatus]{
	stringStatus("phase", "Progress of the maintenance: `Running`, `Succeeded` (node cordoned and drained) or `Failed`.",
		func(s nmv1beta1.NodeMaintenanceStatus) string { return string(s.Phase) }),
	int64Status("drain_progress", "Percentage (0–100) of the pods that had to be evicted that are gone.",
		func(s nmv1beta1.NodeMaintenanceStatus) int { return s.DrainProgress }),
	stringStatus("last_update", "Time of the last status change (RFC 3339).", lastUpdate),
	stringStatus("last_error", "Last error of the operator, empty when there is none (for example the PodDisruptionBudget that blocks an eviction).",
		func(s nmv1beta1.NodeMaintenanceStatus) string { return s.LastError }),
	listStatus("pending_pods", "Names of the pods not evicted yet.", types.StringType, pendingPodNames),
	listStatus("pending_pods_refs", "Pods not evicted yet, with their namespaces.", podRefType, pendingPodRefs),
	int64Status("total_pods", "Pods on the node when the maintenance started.",
		func(s nmv1beta1.NodeMaintenanceStatus) int { return s.TotalPods }),
	int64Status("eviction_pods", "Pods that had to be evicted, counted when the maintenance started.",
		func(s nmv1beta1.NodeMaintenanceStatus) int { return s.EvictionPods }),
	int64Status("error_on_lease_count",
		fmt.Sprintf("Consecutive failures to hold the node lease; more than %d fail the maintenance.", nmv1beta1.MaxLeaseErrors),
		func(s nmv1beta1.NodeMaintenanceStatus) int { return s.ErrorOnLeaseCount }),
	listStatus("conditions", "The operator's conditions, consistent with `phase`: `Cordoned`, `LeaseHeld` and `Drained` (`True` exactly when "+
		"the phase is `Succeeded`; while `False`, its reason says why: `Draining`, `BlockedByPDB`, `WaitingForPods`, `TimedOut`, `Forced`, `Failed`). "+
		"Under the operator's `max_unavailable` also `Queued`: `True` (reason `WaitingForSlot`, its message naming the maintenances ahead) "+
		"while the maintenance waits for a slot, its node untouched; `False` (`SlotAcquired`) once it started. "+
		"Each has `type`, `status` (`True`, `False`, `Unknown`), `reason`, `message` and `last_transition_time` (RFC 3339).",
		conditionType, conditions),
}

// statusAttribute is one status attribute: its name and type, its schema
// (with its description) in the resource and in the data sources, its
// unknown value and how it is read from the CR's status S (the
// NodeMaintenance's, or the rollout's). The constructors below build each
// kind.
type statusAttribute[S any] struct {
	name       string
	typ        attr.Type
	resource   func() rschema.Attribute
	dataSource func() dschema.Attribute
	unknown    attr.Value
	read       func(context.Context, S) (attr.Value, diag.Diagnostics)
}

// statusTable is the status attributes of one kind, in the order of its status.
type statusTable[S any] []statusAttribute[S]

// Status changes only through apply and refresh: the resource keeps the prior
// value in plans (UseStateForUnknown) to avoid "(known after apply)" noise on
// every reason change.

func stringStatus[S any](name, desc string, get func(S) string) statusAttribute[S] {
	return statusAttribute[S]{name: name, typ: types.StringType,
		resource: func() rschema.Attribute {
			return rschema.StringAttribute{Computed: true, MarkdownDescription: desc,
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}}
		},
		dataSource: func() dschema.Attribute {
			return dschema.StringAttribute{Computed: true, MarkdownDescription: desc}
		},
		unknown: types.StringUnknown(),
		read: func(_ context.Context, s S) (attr.Value, diag.Diagnostics) {
			return types.StringValue(get(s)), nil
		},
	}
}

func int64Status[S any](name, desc string, get func(S) int) statusAttribute[S] {
	return statusAttribute[S]{name: name, typ: types.Int64Type,
		resource: func() rschema.Attribute {
			return rschema.Int64Attribute{Computed: true, MarkdownDescription: desc,
				PlanModifiers: []planmodifier.Int64{int64planmodifier.UseStateForUnknown()}}
		},
		dataSource: func() dschema.Attribute {
			return dschema.Int64Attribute{Computed: true, MarkdownDescription: desc}
		},
		unknown: types.Int64Unknown(),
		read: func(_ context.Context, s S) (attr.Value, diag.Diagnostics) {
			return types.Int64Value(int64(get(s))), nil
		},
	}
}

func listStatus[S any](name, desc string, elem attr.Type,
	read func(context.Context, S) (attr.Value, diag.Diagnostics)) statusAttribute[S] {
	return statusAttribute[S]{name: name, typ: types.ListType{ElemType: elem},
		resource: func() rschema.Attribute {
			return rschema.ListAttribute{Computed: true, ElementType: elem, MarkdownDescription: desc,
				PlanModifiers: []planmodifier.List{listplanmodifier.UseStateForUnknown()}}
		},
		dataSource: func() dschema.Attribute {
			return dschema.ListAttribute{Computed: true, ElementType: elem, MarkdownDescription: desc}
		},
		unknown: types.ListUnknown(elem),
		read:    read,
	}
}

func lastUpdate(s nmv1beta1.NodeMaintenanceStatus) string {
	if s.LastUpdate.IsZero() {
		return ""
	}
	return s.LastUpdate.UTC().Format(time.RFC3339)
}

func pendingPodNames(ctx context.Context, s nmv1beta1.NodeMaintenanceStatus) (attr.Value, diag.Diagnostics) {
	names := s.PendingPods
	if names == nil {
		names = []string{}
	}
	return types.ListValueFrom(ctx, types.StringType, names)
}

func pendingPodRefs(_ context.Context, s nmv1beta1.NodeMaintenanceStatus) (attr.Value, diag.Diagnostics) {
	var diags diag.Diagnostics
	refs := make([]attr.Value, 0, len(s.PendingPodsRefs))
	for _, r := range s.PendingPodsRefs {
		obj, d := types.ObjectValue(podRefType.AttrTypes, map[string]attr.Value{"namespace": types.StringValue(r.Namespace), "name": types.StringValue(r.Name)})
		diags.Append(d...)
		refs = append(refs, obj)
	}
	list, d := types.ListValue(podRefType, refs)
	diags.Append(d...)
	return list, diags
}

func conditions(_ context.Context, s nmv1beta1.NodeMaintenanceStatus) (attr.Value, diag.Diagnostics) {
	var diags diag.Diagnostics
	out := make([]attr.Value, 0, len(s.Conditions))
	for _, c := range s.Conditions {
		obj, d := types.ObjectValue(conditionType.AttrTypes, map[string]attr.Value{
			"type": types.StringValue(c.Type), "status": types.StringValue(string(c.Status)), "reason": types.StringValue(c.Reason),
			"message": types.StringValue(c.Message), "last_transition_time": types.StringValue(c.LastTransitionTime.UTC().Format(time.RFC3339)),
		})
		diags.Append(d...)
		out = append(out, obj)
	}
	list, d := types.ListValue(conditionType, out)
	diags.Append(d...)
	return list, diags
}

// resourceAttributes and dataSourceAttributes add the status attributes to
// a schema's attributes.
func (t statusTable[S]) resourceAttributes(attrs map[string]rschema.Attribute) {
	for _, a := range t {
		attrs[a.name] = a.resource()
	}
}

func (t statusTable[S]) dataSourceAttributes(attrs map[string]dschema.Attribute) {
	for _, a := range t {
		attrs[a.name] = a.dataSource()
	}
}

// attrTypes are the types of the status attributes.
func (t statusTable[S]) attrTypes() map[string]attr.Type {
	out := make(map[string]attr.Type, len(t))
	for _, a := range t {
		out[a.name] = a.typ
	}
	return out
}

// values reads every status attribute from the CR's status.
func (t statusTable[S]) values(ctx context.Context, s S) (map[string]attr.Value, diag.Diagnostics) {
	var diags diag.Diagnostics
	values := make(map[string]attr.Value, len(t))
	for _, a := range t {
		v, d := a.read(ctx, s)
		diags.Append(d...)
		values[a.name] = v
	}
	return values, diags
}

// unknownValues are the plan of a status that apply will read: every
// attribute "(known after apply)".
func (t statusTable[S]) unknownValues() map[string]attr.Value {
	values := make(map[string]attr.Value, len(t))
	for _, a := range t {
		values[a.name] = a.unknown
	}
	return values
}

// modelOf fills a model struct of the status (statusModel, rolloutStatusModel)
// from the values: a field missing on either side is an error.
func modelOf[M any](ctx context.Context, attrTypes map[string]attr.Type, values map[string]attr.Value) (M, diag.Diagnostics) {
	var m M
	obj, diags := types.ObjectValue(attrTypes, values)
	if diags.HasError() {
		return m, diags
	}
	diags.Append(obj.As(ctx, &m, basetypes.ObjectAsOptions{})...)
	return m, diags
}

func resourceStatusAttributes(attrs map[string]rschema.Attribute) {
	statusAttributes.resourceAttributes(attrs)
}

func dataSourceStatusAttributes(attrs map[string]dschema.Attribute) {
	statusAttributes.dataSourceAttributes(attrs)
}

func statusAttrTypes() map[string]attr.Type { return statusAttributes.attrTypes() }

func statusValues(ctx context.Context, s nmv1beta1.NodeMaintenanceStatus) (map[string]attr.Value, diag.Diagnostics) {
	return statusAttributes.values(ctx, s)
}

func statusFrom(ctx context.Context, s nmv1beta1.NodeMaintenanceStatus) (statusModel, diag.Diagnostics) {
	values, diags := statusValues(ctx, s)
	m, d := statusModelOf(ctx, values)
	diags.Append(d...)
	return m, diags
}

func statusModelOf(ctx context.Context, values map[string]attr.Value) (statusModel, diag.Diagnostics) {
	return modelOf[statusModel](ctx, statusAttrTypes(), values)
}

// nodeMaintenanceAttrTypes is one NodeMaintenance as an object (data source
// lists): its name, node and reason, and its status.
var nodeMaintenanceAttrTypes = func() map[string]attr.Type {
	t := statusAttrTypes()
	t["name"], t["node_name"], t["reason"] = types.StringType, types.StringType, types.StringType
	return t
}()

func objectFrom(ctx context.Context, nm *nmv1beta1.NodeMaintenance) (types.Object, diag.Diagnostics) {
	values, diags := statusValues(ctx, nm.Status)
	values["name"], values["node_name"], values["reason"] =
		types.StringValue(nm.Name), types.StringValue(nm.Spec.NodeName), types.StringValue(nm.Spec.Reason)
	obj, d := types.ObjectValue(nodeMaintenanceAttrTypes, values)
	diags.Append(d...)
	return obj, diags
}

// unknownStatus is the plan of a status that apply will read.
func unknownStatus(ctx context.Context) (statusModel, diag.Diagnostics) {
	return statusModelOf(ctx, statusAttributes.unknownValues())
}

// inProgress tells whether a status in the state is of a maintenance the
// operator has not finished: not yet picked up, or Running.
func (s statusModel) inProgress() bool {
	if s.Phase.IsNull() || s.Phase.IsUnknown() {
		return false
	}
	p := nmv1beta1.MaintenancePhase(s.Phase.ValueString())
	return p != nmv1beta1.MaintenanceSucceeded && p != nmv1beta1.MaintenanceFailed
}
