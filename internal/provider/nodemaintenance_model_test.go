package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

func TestStatusFromReadsEveryAttribute(t *testing.T) {
	ctx := context.Background()
	s := nmv1beta1.NodeMaintenanceStatus{
		Phase: nmv1beta1.MaintenanceRunning, DrainProgress: 50, TotalPods: 4, EvictionPods: 2, ErrorOnLeaseCount: 1,
		LastError:       "pdb blocks eviction",
		LastUpdate:      metav1.NewTime(time.Date(2026, 12, 3, 10, 0, 0, 0, time.FixedZone("CET", 3600))),
		PendingPods:     []string{"web-1"},
		PendingPodsRefs: []nmv1beta1.PodReference{{Namespace: "shop", Name: "web-1"}},
		Conditions: []metav1.Condition{{Type: nmv1beta1.ConditionDrained, Status: metav1.ConditionFalse, Reason: nmv1beta1.ReasonBlockedByPDB,
			Message: "pdb blocks eviction", LastTransitionTime: metav1.NewTime(time.Date(2026, 12, 3, 9, 30, 0, 0, time.UTC))}},
	}
	m, diags := statusFrom(ctx, s)
	if diags.HasError() {
		t.Fatal(diags)
	}
	ref := types.ObjectValueMust(podRefType.AttrTypes, map[string]attr.Value{"namespace": types.StringValue("shop"), "name": types.StringValue("web-1")})
	want := statusModel{
		Phase: types.StringValue("Running"), DrainProgress: types.Int64Value(50),
		PendingPods:     types.ListValueMust(types.StringType, []attr.Value{types.StringValue("web-1")}),
		PendingPodsRefs: types.ListValueMust(podRefType, []attr.Value{ref}),
		TotalPods:       types.Int64Value(4), EvictionPods: types.Int64Value(2),
		LastError:         types.StringValue("pdb blocks eviction"),
		ErrorOnLeaseCount: types.Int64Value(1), LastUpdate: types.StringValue("2026-12-03T09:00:00Z"),
		Conditions: types.ListValueMust(conditionType, []attr.Value{types.ObjectValueMust(conditionType.AttrTypes, map[string]attr.Value{
			"type": types.StringValue("Drained"), "status": types.StringValue("False"), "reason": types.StringValue("BlockedByPDB"),
			"message": types.StringValue("pdb blocks eviction"), "last_transition_time": types.StringValue("2026-12-03T09:30:00Z"),
		})}),
	}
	if fmt.Sprint(m) != fmt.Sprint(want) {
		t.Errorf("statusFrom = %v\nwant %v", m, want)
	}

	// An empty status: empty lists, not null ones, and no time.
	m, diags = statusFrom(ctx, nmv1beta1.NodeMaintenanceStatus{})
	if diags.HasError() {
		t.Fatal(diags)
	}
	if m.PendingPods.IsNull() || len(m.PendingPods.Elements()) != 0 || m.PendingPodsRefs.IsNull() || m.LastUpdate.ValueString() != "" {
		t.Errorf("statusFrom(empty) = %v", m)
	}
}

func TestUnknownStatusIsUnknownEverywhere(t *testing.T) {
	m, diags := unknownStatus(context.Background())
	if diags.HasError() {
		t.Fatal(diags)
	}
	for _, v := range []attr.Value{m.Phase, m.DrainProgress, m.PendingPods, m.PendingPodsRefs, m.TotalPods,
		m.EvictionPods, m.LastError, m.ErrorOnLeaseCount, m.LastUpdate, m.Conditions} {
		if !v.IsUnknown() {
			t.Errorf("%v is known", v)
		}
	}
}

// Every schema with a status has every status attribute, of its type, with
// its description.
func TestStatusAttributesInEverySchema(t *testing.T) {
	ctx := context.Background()
	rs := &resource.SchemaResponse{}
	NewNodeMaintenanceResource().Schema(ctx, resource.SchemaRequest{}, rs)
	ds := &datasource.SchemaResponse{}
	NewNodeMaintenanceDataSource().Schema(ctx, datasource.SchemaRequest{}, ds)
	descriptions := map[string]bool{}
	for _, a := range statusAttributes {
		r, d := rs.Schema.Attributes[a.name], ds.Schema.Attributes[a.name]
		if r == nil || d == nil {
			t.Fatalf("%s: resource schema %v, data source schema %v", a.name, r, d)
		}
		if !r.GetType().Equal(a.typ) || !d.GetType().Equal(a.typ) || !nodeMaintenanceAttrTypes[a.name].Equal(a.typ) {
			t.Errorf("%s is a %s; resource %s, data source %s, list item %s", a.name, a.typ, r.GetType(), d.GetType(), nodeMaintenanceAttrTypes[a.name])
		}
		if desc := r.GetMarkdownDescription(); desc == "" || desc != d.GetMarkdownDescription() || descriptions[desc] {
			t.Errorf("%s: description %q in the resource, %q in the data source", a.name, desc, d.GetMarkdownDescription())
		}
		descriptions[r.GetMarkdownDescription()] = true
		if !r.IsComputed() || !d.IsComputed() || r.IsOptional() || d.IsOptional() {
			t.Errorf("%s is not computed-only", a.name)
		}
	}
	if got := rs.Schema.Attributes["error_on_lease_count"].GetMarkdownDescription(); !strings.Contains(got, fmt.Sprintf("more than %d fail", nmv1beta1.MaxLeaseErrors)) {
		t.Errorf("error_on_lease_count description %q does not quote MaxLeaseErrors", got)
	}
	if len(nodeMaintenanceAttrTypes) != len(statusAttributes)+3 {
		t.Errorf("list items have %d attributes, want the %d of the status and name, node_name, reason", len(nodeMaintenanceAttrTypes), len(statusAttributes))
	}
}
