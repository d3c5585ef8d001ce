package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// statusModel is the NodeMaintenance status in Terraform's snake_case names,
// shared by the resource and the data sources.
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
}

var podRefType = types.ObjectType{AttrTypes: map[string]attr.Type{"namespace": types.StringType, "name": types.StringType}}

// Descriptions of the status attributes, shared by every schema.
var statusDescriptions = map[string]string{
	"phase":                "Progress of the maintenance: `Running`, `Succeeded` (node cordoned and drained) or `Failed`.",
	"drain_progress":       "Percentage (0–100) of the pods that had to be evicted that are gone.",
	"pending_pods":         "Names of the pods not evicted yet.",
	"pending_pods_refs":    "Pods not evicted yet, with their namespaces.",
	"total_pods":           "Pods on the node when the maintenance started.",
	"eviction_pods":        "Pods that had to be evicted, counted when the maintenance started.",
	"last_error":           "Last error of the operator, empty when there is none (for example the PodDisruptionBudget that blocks an eviction).",
	"error_on_lease_count": "Consecutive failures to hold the node lease; more than 3 fail the maintenance.",
	"last_update":          "Time of the last status change (RFC 3339).",
}

func statusFrom(ctx context.Context, s nmv1beta1.NodeMaintenanceStatus) (statusModel, diag.Diagnostics) {
	var diags diag.Diagnostics
	names := s.PendingPods
	if names == nil {
		names = []string{}
	}
	pending, d := types.ListValueFrom(ctx, types.StringType, names)
	diags.Append(d...)
	refs := make([]attr.Value, 0, len(s.PendingPodsRefs))
	for _, r := range s.PendingPodsRefs {
		obj, d := types.ObjectValue(podRefType.AttrTypes, map[string]attr.Value{"namespace": types.StringValue(r.Namespace), "name": types.StringValue(r.Name)})
		diags.Append(d...)
		refs = append(refs, obj)
	}
	refList, d := types.ListValue(podRefType, refs)
	diags.Append(d...)
	lastUpdate := ""
	if !s.LastUpdate.IsZero() {
		lastUpdate = s.LastUpdate.UTC().Format(time.RFC3339)
	}
	return statusModel{
		Phase:             types.StringValue(string(s.Phase)),
		DrainProgress:     types.Int64Value(int64(s.DrainProgress)),
		PendingPods:       pending,
		PendingPodsRefs:   refList,
		TotalPods:         types.Int64Value(int64(s.TotalPods)),
		EvictionPods:      types.Int64Value(int64(s.EvictionPods)),
		LastError:         types.StringValue(s.LastError),
		ErrorOnLeaseCount: types.Int64Value(int64(s.ErrorOnLeaseCount)),
		LastUpdate:        types.StringValue(lastUpdate),
	}, diags
}

// nodeMaintenanceAttrTypes is one NodeMaintenance as an object (data source lists).
var nodeMaintenanceAttrTypes = map[string]attr.Type{
	"name": types.StringType, "node_name": types.StringType, "reason": types.StringType,
	"phase": types.StringType, "drain_progress": types.Int64Type, "pending_pods": types.ListType{ElemType: types.StringType},
	"pending_pods_refs": types.ListType{ElemType: podRefType}, "total_pods": types.Int64Type, "eviction_pods": types.Int64Type,
	"last_error": types.StringType, "error_on_lease_count": types.Int64Type, "last_update": types.StringType,
}

func objectFrom(ctx context.Context, nm *nmv1beta1.NodeMaintenance) (types.Object, diag.Diagnostics) {
	s, diags := statusFrom(ctx, nm.Status)
	obj, d := types.ObjectValue(nodeMaintenanceAttrTypes, map[string]attr.Value{
		"name": types.StringValue(nm.Name), "node_name": types.StringValue(nm.Spec.NodeName), "reason": types.StringValue(nm.Spec.Reason),
		"phase": s.Phase, "drain_progress": s.DrainProgress, "pending_pods": s.PendingPods, "pending_pods_refs": s.PendingPodsRefs,
		"total_pods": s.TotalPods, "eviction_pods": s.EvictionPods, "last_error": s.LastError,
		"error_on_lease_count": s.ErrorOnLeaseCount, "last_update": s.LastUpdate,
	})
	diags.Append(d...)
	return obj, diags
}

// unknownStatus is the plan of a status that apply will read: every attribute
// "(known after apply)".
func unknownStatus() statusModel {
	return statusModel{
		Phase: types.StringUnknown(), DrainProgress: types.Int64Unknown(),
		PendingPods: types.ListUnknown(types.StringType), PendingPodsRefs: types.ListUnknown(podRefType),
		TotalPods: types.Int64Unknown(), EvictionPods: types.Int64Unknown(), LastError: types.StringUnknown(),
		ErrorOnLeaseCount: types.Int64Unknown(), LastUpdate: types.StringUnknown(),
	}
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
