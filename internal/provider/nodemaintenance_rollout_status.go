package provider

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

// rolloutStatusModel is the rollout's status in Terraform's names, shared
// by the resource and the data source; rolloutStatusAttributes says
// everything else about each attribute.
type rolloutStatusModel struct {
	Phase      types.String `tfsdk:"phase"`
	Message    types.String `tfsdk:"message"`
	Total      types.Int64  `tfsdk:"total"`
	InProgress types.Int64  `tfsdk:"in_progress"`
	Done       types.Int64  `tfsdk:"done"`
	Failed     types.Int64  `tfsdk:"failed"`
	Nodes      types.List   `tfsdk:"nodes"`
	// NextWindowStart and Blockers say what holds the next node.
	NextWindowStart types.String `tfsdk:"next_window_start"`
	Blockers        types.List   `tfsdk:"blockers"`
}

type rolloutStatus = nmv1alpha1.NodeMaintenanceRolloutStatus

var rolloutStatusAttributes = statusTable[rolloutStatus]{
	stringStatus("phase", "Progress of the rollout: `Pending` (the node set is not resolved yet), `Progressing`, `Paused` (`paused` is set; "+
		"no new node starts), `Halted` (a node failed; `message` and the failed rows of `nodes` say why) or `Succeeded`.",
		func(s rolloutStatus) string { return string(s.Phase) }),
	stringStatus("message", "What the rollout does, or why it halted, in a sentence.", func(s rolloutStatus) string { return s.Message }),
	int64Status("total", "Nodes in the set, resolved once when the rollout starts.", func(s rolloutStatus) int { return int(s.Total) }),
	int64Status("in_progress", "Nodes between `Draining` and `Soaking`.", func(s rolloutStatus) int { return int(s.InProgress) }),
	int64Status("done", "Nodes `Done`: maintained, restored, recovered and soaked.", func(s rolloutStatus) int { return int(s.Done) }),
	int64Status("failed", "Nodes `Failed`.", func(s rolloutStatus) int { return int(s.Failed) }),
	listStatus("nodes", "A row per node of the set, in the order they are started: "+rolloutNodeFields.describe()+". "+
		"In a set of thousands of nodes, once the rows take more than 1 MiB, those of nodes already `Done` keep only "+
		"`name`, `wave`, `state`, `started_at` and `finished_at`, so that the rollout stays within what etcd keeps of one object.",
		rolloutNodeType, rolloutNodes),
	stringStatus("next_window_start", "While `window` is closed, when it opens next (RFC 3339); empty otherwise.",
		func(s rolloutStatus) string { return rfc3339(s.NextWindowStart) }),
	listStatus("blockers", "What holds the next node, a sentence each: a closed gate, the window, workloads not yet recovered, "+
		"someone else's NodeMaintenance; empty when nothing does.", types.StringType,
		func(_ context.Context, s rolloutStatus) (attr.Value, diag.Diagnostics) { return stringList(s.Blockers) }),
}

// rolloutNodeField is one attribute of a row of nodes.
type rolloutNodeField struct {
	name, desc string
	typ        attr.Type
	get        func(nmv1alpha1.RolloutNode) attr.Value
}

type rolloutNodeTable []rolloutNodeField

var rolloutNodeFields = rolloutNodeTable{
	{"name", "the node", types.StringType, func(n nmv1alpha1.RolloutNode) attr.Value { return types.StringValue(n.Name) }},
	{"wave", "its wave: nodes start in order, at most `max_unavailable` at a time, so wave N holds positions (N-1)×max_unavailable+1 onwards",
		types.Int64Type, func(n nmv1alpha1.RolloutNode) attr.Value { return types.Int64Value(int64(n.Wave)) }},
	{"state", "`Waiting`, `Draining`, `StepRunning`, `Holding`, `Restoring`, `Recovering`, `Soaking`, `Done` or `Failed`", types.StringType,
		func(n nmv1alpha1.RolloutNode) attr.Value { return types.StringValue(string(n.State)) }},
	{"maintenance", "the name of its NodeMaintenance, once created", types.StringType,
		func(n nmv1alpha1.RolloutNode) attr.Value { return types.StringValue(n.Maintenance) }},
	{"job", "the name of its step Job, once created", types.StringType, func(n nmv1alpha1.RolloutNode) attr.Value { return types.StringValue(n.Job) }},
	{"waiting_for", "another NodeMaintenance of the node that it waits for", types.StringType,
		func(n nmv1alpha1.RolloutNode) attr.Value { return types.StringValue(n.WaitingFor) }},
	{"reason", "why it is in its state; for a failure, what failed", types.StringType,
		func(n nmv1alpha1.RolloutNode) attr.Value { return types.StringValue(n.Reason) }},
	timeField("started_at", "when its NodeMaintenance was created", func(n nmv1alpha1.RolloutNode) *metav1.Time { return n.StartedAt }),
	timeField("drained_at", "when it was drained", func(n nmv1alpha1.RolloutNode) *metav1.Time { return n.DrainedAt }),
	timeField("step_finished_at", "when its step Job completed or its hold ended", func(n nmv1alpha1.RolloutNode) *metav1.Time { return n.StepFinishedAt }),
	timeField("restored_at", "when it was restored and Ready", func(n nmv1alpha1.RolloutNode) *metav1.Time { return n.RestoredAt }),
	{"workloads", "the Deployments, ReplicaSets and StatefulSets its drain was to evict pods of (`Kind namespace/name`), recorded when it " +
		"started: the recovery gate waits for them", types.ListType{ElemType: types.StringType},
		func(n nmv1alpha1.RolloutNode) attr.Value { v, _ := stringList(n.Workloads); return v }},
	{"waiting_for_workloads", "those of `workloads` not yet fully available again, each with its availability", types.ListType{ElemType: types.StringType},
		func(n nmv1alpha1.RolloutNode) attr.Value { v, _ := stringList(n.WaitingForWorkloads); return v }},
	timeField("recovered_at", "when it and its workloads had recovered", func(n nmv1alpha1.RolloutNode) *metav1.Time { return n.RecoveredAt }),
	timeField("finished_at", "when it became `Done` or `Failed`", func(n nmv1alpha1.RolloutNode) *metav1.Time { return n.FinishedAt }),
}

// timeField is a time of a row, RFC 3339, empty until it happened.
func timeField(name, desc string, get func(nmv1alpha1.RolloutNode) *metav1.Time) rolloutNodeField {
	return rolloutNodeField{name, desc + "; RFC 3339, empty until then", types.StringType, func(n nmv1alpha1.RolloutNode) attr.Value {
		return types.StringValue(rfc3339(get(n)))
	}}
}

// rfc3339 is t in RFC 3339, UTC; "" for nil.
func rfc3339(t *metav1.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// stringList is a list of strings, empty (not null) for none.
func stringList(s []string) (types.List, diag.Diagnostics) {
	values := make([]attr.Value, 0, len(s))
	for _, v := range s {
		values = append(values, types.StringValue(v))
	}
	return types.ListValue(types.StringType, values)
}

func (t rolloutNodeTable) describe() string {
	parts := make([]string, 0, len(t))
	for _, f := range t {
		parts = append(parts, fmt.Sprintf("`%s` (%s)", f.name, f.desc))
	}
	return strings.Join(parts, ", ")
}

var rolloutNodeType = types.ObjectType{AttrTypes: func() map[string]attr.Type {
	out := make(map[string]attr.Type, len(rolloutNodeFields))
	for _, f := range rolloutNodeFields {
		out[f.name] = f.typ
	}
	return out
}()}

func rolloutNodes(_ context.Context, s rolloutStatus) (attr.Value, diag.Diagnostics) {
	var diags diag.Diagnostics
	rows := make([]attr.Value, 0, len(s.Nodes))
	for _, n := range s.Nodes {
		values := make(map[string]attr.Value, len(rolloutNodeFields))
		for _, f := range rolloutNodeFields {
			values[f.name] = f.get(n)
		}
		row, d := types.ObjectValue(rolloutNodeType.AttrTypes, values)
		diags.Append(d...)
		rows = append(rows, row)
	}
	list, d := types.ListValue(rolloutNodeType, rows)
	diags.Append(d...)
	return list, diags
}

func rolloutStatusFrom(ctx context.Context, s rolloutStatus) (rolloutStatusModel, diag.Diagnostics) {
	values, diags := rolloutStatusAttributes.values(ctx, s)
	m, d := modelOf[rolloutStatusModel](ctx, rolloutStatusAttributes.attrTypes(), values)
	diags.Append(d...)
	return m, diags
}

func unknownRolloutStatus(ctx context.Context) (rolloutStatusModel, diag.Diagnostics) {
	return modelOf[rolloutStatusModel](ctx, rolloutStatusAttributes.attrTypes(), rolloutStatusAttributes.unknownValues())
}
