package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

// The attributes that make a rollout safe (issue #29): the recovery gate,
// the Prometheus gate, the maintenance window and the notifications. Every
// one changes in place. What they may hold is checked by the API's rules
// (validRollout), in the attributes' names; only the shape of each value
// (a duration, an enum) by validators of their own.

// rolloutSafetyModel is the part of spec that makes a rollout safe.
type rolloutSafetyModel struct {
	RecoveryGate    types.String `tfsdk:"recovery_gate"`
	RecoveryTimeout types.String `tfsdk:"recovery_timeout"`
	Gates           types.Object `tfsdk:"gates"`
	Window          types.Object `tfsdk:"window"`
	Notify          types.List   `tfsdk:"notify"`
}

type gatesModel struct {
	Prometheus types.Object `tfsdk:"prometheus"`
}

type prometheusGateModel struct {
	URL   types.String `tfsdk:"url"`
	Query types.String `tfsdk:"query"`
}

type windowModel struct {
	Days     types.List   `tfsdk:"days"`
	Start    types.String `tfsdk:"start"`
	End      types.String `tfsdk:"end"`
	TimeZone types.String `tfsdk:"time_zone"`
}

type notifyModel struct {
	URL       types.String `tfsdk:"url"`
	Events    types.List   `tfsdk:"events"`
	SecretRef types.Object `tfsdk:"secret_ref"`
}

type secretRefModel struct {
	Name types.String `tfsdk:"name"`
	Key  types.String `tfsdk:"key"`
}

var (
	prometheusAttrTypes = map[string]attr.Type{"url": types.StringType, "query": types.StringType}
	gatesAttrTypes      = map[string]attr.Type{"prometheus": types.ObjectType{AttrTypes: prometheusAttrTypes}}
	windowAttrTypes     = map[string]attr.Type{"days": types.ListType{ElemType: types.StringType}, "start": types.StringType,
		"end": types.StringType, "time_zone": types.StringType}
	secretRefAttrTypes = map[string]attr.Type{"name": types.StringType, "key": types.StringType}
	notifyAttrTypes    = map[string]attr.Type{"url": types.StringType, "events": types.ListType{ElemType: types.StringType},
		"secret_ref": types.ObjectType{AttrTypes: secretRefAttrTypes}}
	notifyType = types.ObjectType{AttrTypes: notifyAttrTypes}
)

// notificationEvents are the values of notify.events, in the API's order.
var notificationEvents = []string{
	string(nmv1alpha1.EventStarted), string(nmv1alpha1.EventBlocked), string(nmv1alpha1.EventNodeDone), string(nmv1alpha1.EventNodeFailed),
	string(nmv1alpha1.EventHalted), string(nmv1alpha1.EventSucceeded), string(nmv1alpha1.EventRestored),
}

// safetyAttributes adds the attributes of rolloutSafetyModel to attrs.
func safetyAttributes(attrs map[string]schema.Attribute) {
	attrs["recovery_gate"] = schema.StringAttribute{Optional: true,
		MarkdownDescription: "What a restored node waits for before its slot goes to the next node: `Workloads` (the default) waits " +
			"until the node is Ready and every Deployment, ReplicaSet and StatefulSet that had pods evicted from it is fully available " +
			"again; `NodeReady` waits only for the node to be Ready. Updated in place.",
		Validators: []validator.String{stringvalidator.OneOf(string(nmv1alpha1.RecoveryWorkloads), string(nmv1alpha1.RecoveryNodeReady))}}
	attrs["recovery_timeout"] = schema.StringAttribute{Optional: true,
		MarkdownDescription: "Bounds the recovery wait of one node, from its restore, as a Go duration (default `10m`); past it the node " +
			"fails, naming the workloads not recovered, and the rollout follows `on_failure`. Updated in place.",
		Validators: []validator.String{positiveDuration{}}}
	attrs["gates"] = schema.SingleNestedAttribute{Optional: true,
		MarkdownDescription: "Checks outside the rollout that hold the next node while they are closed; the nodes in progress finish. " +
			"Updated in place.",
		Attributes: map[string]schema.Attribute{
			"prometheus": schema.SingleNestedAttribute{Optional: true,
				MarkdownDescription: "A Prometheus instant query that must return no series for a node to start, as an alert gate. While " +
					"Prometheus cannot be reached the gate stays closed: the rollout never proceeds blind.",
				Attributes: map[string]schema.Attribute{
					"url": schema.StringAttribute{Required: true,
						MarkdownDescription: "The Prometheus server's base URL, `http` or `https` (e.g. `http://prometheus.monitoring:9090`), " +
							"as the operator reaches it."},
					"query": schema.StringAttribute{Required: true,
						MarkdownDescription: "A PromQL expression, e.g. `ALERTS{alertstate=\"firing\",severity=\"critical\"}`; checked with " +
							"Prometheus's own parser at plan time."},
				}},
		}}
	attrs["window"] = windowAttribute()
	attrs["notify"] = notifyAttribute()
}

func windowAttribute() schema.Attribute {
	return schema.SingleNestedAttribute{Optional: true,
		MarkdownDescription: "When nodes may start: a node starts only inside the window, and a node in progress finishes. `next_window_start` " +
			"says when a closed window opens. Updated in place.",
		Attributes: map[string]schema.Attribute{
			"days": schema.ListAttribute{Required: true, ElementType: types.StringType,
				MarkdownDescription: "The days on which the window opens, as English day names, full or three letters, any case " +
					"(`[\"Mon\", \"tuesday\"]`)."},
			"start": schema.StringAttribute{Required: true, MarkdownDescription: "When the window opens on each of its days, `HH:MM` (24 hours)."},
			"end": schema.StringAttribute{Required: true,
				MarkdownDescription: "When it closes, `HH:MM`. An end at or before `start` closes it on the next day (`22:00` to `04:00` " +
					"crosses midnight); an end equal to `start` makes a window of 24 hours."},
			"time_zone": schema.StringAttribute{Optional: true,
				MarkdownDescription: "The IANA time zone of `start` and `end` (`Europe/Berlin`); default UTC. Daylight saving changes are followed."},
		}}
}

func notifyAttribute() schema.Attribute {
	return schema.ListNestedAttribute{Optional: true,
		MarkdownDescription: "HTTP endpoints that receive CloudEvents (structured JSON) for the rollout's transitions; a notification " +
			"that cannot be sent is retried, then dropped and counted, and never blocks or fails the rollout. See the guide " +
			"\"Notifications\". Updated in place.",
		Validators: []validator.List{listvalidator.SizeAtMost(10)},
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"url": schema.StringAttribute{Required: true, MarkdownDescription: "Receives the events by HTTP POST; `http` or `https`."},
			"events": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "The transitions sent, of `Started`, `Blocked`, `NodeDone`, `NodeFailed`, `Halted`, `Succeeded` and " +
					"`Restored`; unset sends every one.",
				Validators: []validator.List{listvalidator.UniqueValues(), listvalidator.ValueStringsAre(stringvalidator.OneOf(notificationEvents...))}},
			"secret_ref": schema.SingleNestedAttribute{Optional: true,
				MarkdownDescription: "A key of a Secret in the operator's namespace whose value is sent as the bearer token " +
					"(`Authorization: Bearer <value>`).",
				Attributes: map[string]schema.Attribute{
					"name": schema.StringAttribute{Required: true, MarkdownDescription: "The Secret's name."},
					"key":  schema.StringAttribute{Required: true, MarkdownDescription: "The key in the Secret's data."},
				}},
		}},
	}
}

// safetySpec sets the safety fields of s from the model; unknown values
// leave their field unset (plan time).
func (m rolloutSafetyModel) safetySpec(ctx context.Context, s *nmv1alpha1.NodeMaintenanceRolloutSpec) diag.Diagnostics {
	var diags diag.Diagnostics
	s.RecoveryGate = nmv1alpha1.RecoveryGate(m.RecoveryGate.ValueString())
	s.RecoveryTimeout = specDuration(m.RecoveryTimeout, path.Root("recovery_timeout"), &diags)
	if knownObject(m.Gates) {
		var g gatesModel
		diags.Append(m.Gates.As(ctx, &g, basetypes.ObjectAsOptions{})...)
		if knownObject(g.Prometheus) {
			var p prometheusGateModel
			diags.Append(g.Prometheus.As(ctx, &p, basetypes.ObjectAsOptions{})...)
			s.Gates = &nmv1alpha1.RolloutGates{Prometheus: &nmv1alpha1.PrometheusGate{URL: p.URL.ValueString(), Query: p.Query.ValueString()}}
		} else {
			s.Gates = &nmv1alpha1.RolloutGates{}
		}
	}
	if knownObject(m.Window) {
		var w windowModel
		diags.Append(m.Window.As(ctx, &w, basetypes.ObjectAsOptions{})...)
		s.Window = &nmv1alpha1.MaintenanceWindow{Start: w.Start.ValueString(), End: w.End.ValueString(), TimeZone: w.TimeZone.ValueString()}
		if !w.Days.IsUnknown() {
			diags.Append(w.Days.ElementsAs(ctx, &s.Window.Days, false)...)
		}
	}
	if !m.Notify.IsNull() && !m.Notify.IsUnknown() {
		var list []notifyModel
		diags.Append(m.Notify.ElementsAs(ctx, &list, false)...)
		for _, n := range list {
			s.Notify = append(s.Notify, n.notification(ctx, &diags))
		}
	}
	return diags
}

func knownObject(o types.Object) bool { return !o.IsNull() && !o.IsUnknown() }

func (n notifyModel) notification(ctx context.Context, diags *diag.Diagnostics) nmv1alpha1.Notification {
	out := nmv1alpha1.Notification{URL: n.URL.ValueString()}
	if !n.Events.IsNull() && !n.Events.IsUnknown() {
		diags.Append(n.Events.ElementsAs(ctx, &out.Events, false)...)
	}
	if knownObject(n.SecretRef) {
		var ref secretRefModel
		diags.Append(n.SecretRef.As(ctx, &ref, basetypes.ObjectAsOptions{})...)
		out.SecretRef = &nmv1alpha1.SecretKeyRef{Name: ref.Name.ValueString(), Key: ref.Key.ValueString()}
	}
	return out
}

// readSafety sets the model from the rollout's spec; a duration written
// in other words (10m and 10m0s) keeps the prior value.
func (m *rolloutSafetyModel) readSafety(ctx context.Context, s nmv1alpha1.NodeMaintenanceRolloutSpec) diag.Diagnostics {
	var diags diag.Diagnostics
	m.RecoveryGate = types.StringNull()
	if s.RecoveryGate != "" {
		m.RecoveryGate = types.StringValue(string(s.RecoveryGate))
	}
	m.RecoveryTimeout = durationValue(s.RecoveryTimeout, m.RecoveryTimeout)
	m.Gates = types.ObjectNull(gatesAttrTypes)
	if s.Gates != nil {
		prom := types.ObjectNull(prometheusAttrTypes)
		if p := s.Gates.Prometheus; p != nil {
			prom = objectValue(prometheusAttrTypes, map[string]attr.Value{"url": types.StringValue(p.URL), "query": types.StringValue(p.Query)}, &diags)
		}
		m.Gates = objectValue(gatesAttrTypes, map[string]attr.Value{"prometheus": prom}, &diags)
	}
	m.Window = types.ObjectNull(windowAttrTypes)
	if w := s.Window; w != nil {
		days, d := types.ListValueFrom(ctx, types.StringType, w.Days)
		diags.Append(d...)
		m.Window = objectValue(windowAttrTypes, map[string]attr.Value{"days": days, "start": types.StringValue(w.Start),
			"end": types.StringValue(w.End), "time_zone": optionalString(w.TimeZone)}, &diags)
	}
	m.Notify = types.ListNull(notifyType)
	if len(s.Notify) > 0 {
		rows := make([]attr.Value, 0, len(s.Notify))
		for _, n := range s.Notify {
			rows = append(rows, notifyValue(ctx, n, &diags))
		}
		list, d := types.ListValue(notifyType, rows)
		diags.Append(d...)
		m.Notify = list
	}
	return diags
}

func notifyValue(ctx context.Context, n nmv1alpha1.Notification, diags *diag.Diagnostics) attr.Value {
	events := types.ListNull(types.StringType)
	if len(n.Events) > 0 {
		var d diag.Diagnostics
		events, d = types.ListValueFrom(ctx, types.StringType, n.Events)
		diags.Append(d...)
	}
	ref := types.ObjectNull(secretRefAttrTypes)
	if n.SecretRef != nil {
		ref = objectValue(secretRefAttrTypes, map[string]attr.Value{"name": types.StringValue(n.SecretRef.Name),
			"key": types.StringValue(n.SecretRef.Key)}, diags)
	}
	return objectValue(notifyAttrTypes, map[string]attr.Value{"url": types.StringValue(n.URL), "events": events, "secret_ref": ref}, diags)
}

func objectValue(attrTypes map[string]attr.Type, values map[string]attr.Value, diags *diag.Diagnostics) types.Object {
	o, d := types.ObjectValue(attrTypes, values)
	diags.Append(d...)
	return o
}

func optionalString(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}
