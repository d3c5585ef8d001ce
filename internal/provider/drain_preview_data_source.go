package provider

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain/live"
)

var _ datasource.DataSourceWithConfigure = &DrainPreviewDataSource{}

// previewReadTimeout bounds the data source's reads of the cluster.
const previewReadTimeout = 30 * time.Second

// NewDrainPreviewDataSource is the constructor of the nodemaintenance_drain_preview data source.
func NewDrainPreviewDataSource() datasource.DataSource { return &DrainPreviewDataSource{} }

// DrainPreviewDataSource says what a drain of a node would do now, without
// touching the node (drain.Preview).
type DrainPreviewDataSource struct {
	clients *clients
}

type podReasonModel struct {
	Pod    string `tfsdk:"pod"`
	Reason string `tfsdk:"reason"`
}

type riskModel struct {
	Kind    string   `tfsdk:"kind"`
	Blocker bool     `tfsdk:"blocker"`
	Subject string   `tfsdk:"subject"`
	Pods    []string `tfsdk:"pods"`
	Message string   `tfsdk:"message"`
}

type drainPreviewDataSourceModel struct {
	ID       types.String     `tfsdk:"id"`
	NodeName types.String     `tfsdk:"node_name"`
	Drain    types.Object     `tfsdk:"drain"`
	Evict    []string         `tfsdk:"evict"`
	Skip     []podReasonModel `tfsdk:"skip"`
	WaitFor  []podReasonModel `tfsdk:"wait_for"`
	Risks    []riskModel      `tfsdk:"risks"`
	Blockers []string         `tfsdk:"blockers"`
	Warnings []string         `tfsdk:"warnings"`
	Blocked  types.Bool       `tfsdk:"blocked"`
	Unplaced []string         `tfsdk:"unplaced_pods"`
	Summary  types.String     `tfsdk:"summary"`
}

// Metadata names the data source type.
func (d *DrainPreviewDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_drain_preview"
}

// Schema of the nodemaintenance_drain_preview data source.
func (d *DrainPreviewDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	podReason := schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
		"pod":    schema.StringAttribute{Computed: true, MarkdownDescription: "The pod, as `namespace/name`."},
		"reason": schema.StringAttribute{Computed: true, MarkdownDescription: "Why it is there."},
	}}
	resp.Schema = schema.Schema{
		MarkdownDescription: "What a drain of a node would do if it started now, without touching the node: the pods the operator " +
			"would evict, leave and wait for (by the operator's own rules), and the risks: PodDisruptionBudgets that allow no " +
			"disruption now, workloads whose every ready replica is on the node, pods without a controller, emptyDir data, and " +
			"whether the other nodes have room for the evicted pods (a first-fit estimate, see `unplaced_pods`). Gate a pipeline on `blocked` " +
			"(see the guide \"Before the drain\"). The provider's identity needs get and list on nodes, and list on pods, " +
			"poddisruptionbudgets and replicasets.",
		Attributes: map[string]schema.Attribute{
			"id":        schema.StringAttribute{Computed: true, MarkdownDescription: "The node name."},
			"node_name": schema.StringAttribute{Required: true, MarkdownDescription: "Node whose drain to preview.", Validators: nodeNameValidators},
			"drain": drainDataSourceAttribute("The drain policy to preview, as the `drain` block of the `nodemaintenance` resource " +
				"(`pod_selector` changes which pods leave; the other fields do not change the preview)."),
			"evict": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Pods the drain would evict, as `namespace/name`, sorted."},
			"skip": schema.ListNestedAttribute{Computed: true, NestedObject: podReason,
				MarkdownDescription: "Pods that would stay on the node (DaemonSet and mirror pods, pods labelled `cluster.x-k8s.io/drain: skip`, " +
					"pods `pod_selector` does not match), sorted, with the reason."},
			"wait_for": schema.ListNestedAttribute{Computed: true, NestedObject: podReason,
				MarkdownDescription: "Pods the drain would wait for without evicting them (terminating, or labelled " +
					"`cluster.x-k8s.io/drain: wait-completed`), sorted, with the reason."},
			"risks": schema.ListNestedAttribute{Computed: true, MarkdownDescription: "Every risk, blockers first.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"kind": schema.StringAttribute{Computed: true, MarkdownDescription: "`" + string(drain.RiskGuard) + "`, `" + string(drain.RiskBudgetAllowsNone) + "`, `" +
						string(drain.RiskMultipleBudgets) + "` (blockers), `" + string(drain.RiskOutage) + "`, `" + string(drain.RiskNoRoom) +
						"`, `" + string(drain.RiskNoController) + "` or `" + string(drain.RiskEmptyDir) + "`."},
					"blocker": schema.BoolAttribute{Computed: true, MarkdownDescription: "The drain would wait on it: the apply waits, and fails at the drain's or the apply's timeout."},
					"subject": schema.StringAttribute{Computed: true, MarkdownDescription: "The object at fault, e.g. `PodDisruptionBudget shop/db` or `Deployment shop/cart`."},
					"pods":    schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "The pods of the node it concerns."},
					"message": schema.StringAttribute{Computed: true, MarkdownDescription: "What would happen and what to do."},
				}}},
			"blockers": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The messages of the risks the drain would wait on (PodDisruptionBudgets that allow no disruption, pods under several budgets)."},
			"warnings": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The messages of the other risks: outages, pods deleted for good, emptyDir data lost, no room for the evicted pods."},
			"blocked": schema.BoolAttribute{Computed: true, MarkdownDescription: "Whether there is a blocker: a drain started now would wait."},
			"unplaced_pods": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Evicted pods whose replacements would fit on no other node, by " + drain.FirstFitNote + "."},
			"summary": schema.StringAttribute{Computed: true, MarkdownDescription: "One line: how many pods leave, stay and are waited for, and how many blockers and warnings there are."},
		},
	}
}

// Configure receives the provider's clients.
func (d *DrainPreviewDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.clients = configuredClients(req.ProviderData, &resp.Diagnostics)
}

// Read makes the preview.
func (d *DrainPreviewDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m drainPreviewDataSourceModel
	if _, ok := begin(ctx, d.clients, &resp.Diagnostics, nil, read(req.Config, &m)); !ok {
		return
	}
	policy, diags := drainPolicy(ctx, m.Drain)
	if resp.Diagnostics.Append(diags...); diags.HasError() {
		return
	}
	if err := validation.ValidateDrain(policy, true); policy != nil && err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("drain"), "Invalid Drain Policy", terraformNames(err.Error()))
		return
	}
	node := m.NodeName.ValueString()
	ctx, cancel := context.WithTimeout(ctx, previewReadTimeout)
	defer cancel()
	p, err := live.Preview(ctx, d.clients.kube, node, policy, time.Now())
	switch {
	case errors.Is(err, live.ErrNodeNotFound):
		resp.Diagnostics.AddAttributeError(path.Root("node_name"), "Node Not Found",
			fmt.Sprintf("There is no node %q in the cluster at %s: a drain preview needs an existing node (see kubectl get nodes).", node, d.clients.cluster))
		return
	case err != nil:
		d.clients.apiError(&resp.Diagnostics, "Cannot Preview the Drain", fmt.Sprintf("Previewing the drain of node %q", node), err)
		return
	}
	m.setPreview(p)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (m *drainPreviewDataSourceModel) setPreview(p drain.Preview) {
	m.ID = types.StringValue(p.Node)
	m.Evict = podNames(p.Evict)
	m.Skip, m.WaitFor = podReasons(p.Skip), podReasons(p.WaitFor)
	m.Risks, m.Blockers, m.Warnings = []riskModel{}, []string{}, []string{}
	for _, r := range p.Risks {
		m.Risks = append(m.Risks, riskModel{Kind: string(r.Kind), Blocker: r.Blocker, Subject: r.Subject, Pods: podNames(r.Pods), Message: r.Message})
		if r.Blocker {
			m.Blockers = append(m.Blockers, r.Message)
		} else {
			m.Warnings = append(m.Warnings, r.Message)
		}
	}
	m.Blocked = types.BoolValue(len(m.Blockers) > 0)
	m.Unplaced = podNames(p.Unplaced)
	m.Summary = types.StringValue(p.Summary())
}
