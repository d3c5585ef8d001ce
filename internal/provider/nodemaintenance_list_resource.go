package provider

import (
	"context"
	"fmt"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	listschema "github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// The nodemaintenance resource's identity (its name: NodeMaintenances are
// cluster-scoped) and its list resource, which `terraform query` (Terraform
// 1.14 and later) runs to find the NodeMaintenances of a cluster, whoever
// created them, and to write import blocks for them.

var (
	_ resource.ResourceWithIdentity       = &NodeMaintenanceResource{}
	_ list.ListResourceWithConfigure      = &NodeMaintenanceListResource{}
	_ list.ListResourceWithValidateConfig = &NodeMaintenanceListResource{}
)

// nodeMaintenanceIdentityModel is the resource's identity.
type nodeMaintenanceIdentityModel struct {
	Name types.String `tfsdk:"name"`
}

// IdentitySchema says a NodeMaintenance is identified by its name.
func (r *NodeMaintenanceResource) IdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"name": identityschema.StringAttribute{RequiredForImport: true,
			Description: "Name of the NodeMaintenance (cluster-scoped)."},
	}}
}

// setIdentity records the identity of NodeMaintenance name; identity is nil
// when the CLI does not know identities (Terraform before 1.12, OpenTofu).
func setIdentity(ctx context.Context, identity *tfsdk.ResourceIdentity, name string, diags *diag.Diagnostics) {
	if identity == nil {
		return
	}
	diags.Append(identity.Set(ctx, nodeMaintenanceIdentityModel{Name: types.StringValue(name)})...)
}

// ImportState imports a NodeMaintenance by name: `terraform import ADDR NAME`,
// an import block's `id`, or its `identity = { name = ... }`.
func (r *NodeMaintenanceResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	name := req.ID
	if name == "" && req.Identity != nil {
		var id nodeMaintenanceIdentityModel
		resp.Diagnostics.Append(req.Identity.Get(ctx, &id)...)
		name = id.Name.ValueString()
	}
	if name == "" {
		resp.Diagnostics.AddError("Missing NodeMaintenance Name",
			"Import a NodeMaintenance by its name: `terraform import nodemaintenance.x maintain-node02`, or an import block with `id` or `identity = { name = ... }`.")
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
	setIdentity(ctx, resp.Identity, name, &resp.Diagnostics)
}

// NewNodeMaintenanceListResource is the constructor of the nodemaintenance list resource.
func NewNodeMaintenanceListResource() list.ListResource { return &NodeMaintenanceListResource{} }

// NodeMaintenanceListResource lists NodeMaintenances for `terraform query`.
type NodeMaintenanceListResource struct {
	clients *clients
}

type nodeMaintenanceListConfig struct {
	NodeName      types.String `tfsdk:"node_name"`
	Phase         types.String `tfsdk:"phase"`
	LabelSelector types.String `tfsdk:"label_selector"`
}

// Metadata names the list resource after the resource it lists.
func (l *NodeMaintenanceListResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName
}

// ListResourceConfigSchema is the list block's `config`: every filter is optional.
func (l *NodeMaintenanceListResource) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	resp.Schema = listschema.Schema{
		MarkdownDescription: "Lists the `NodeMaintenance` objects of the cluster, whoever created them (kubectl, another " +
			"configuration, the rollout), for `terraform query`; `-generate-config-out` writes a resource and an import block for each.",
		Attributes: map[string]listschema.Attribute{
			"node_name": listschema.StringAttribute{Optional: true, MarkdownDescription: "Only the NodeMaintenances of this node."},
			"phase":     listschema.StringAttribute{Optional: true, MarkdownDescription: phaseFilterDescription, Validators: phaseFilterValidators},
			"label_selector": listschema.StringAttribute{Optional: true,
				MarkdownDescription: "Only NodeMaintenances whose labels match this selector, as `kubectl get -l` takes it " +
					"(e.g. `team=storage,rollout!=nightly`)."},
		},
	}
}

// Configure receives the provider's clients.
func (l *NodeMaintenanceListResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	l.clients = configuredClients(req.ProviderData, &resp.Diagnostics)
}

// ValidateListResourceConfig refuses a label selector kubectl would refuse.
func (l *NodeMaintenanceListResource) ValidateListResourceConfig(ctx context.Context, req list.ValidateConfigRequest, resp *list.ValidateConfigResponse) {
	var cfg nodeMaintenanceListConfig
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() || cfg.LabelSelector.IsNull() || cfg.LabelSelector.IsUnknown() {
		return
	}
	if _, err := labels.Parse(cfg.LabelSelector.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("label_selector"), "Invalid Label Selector",
			fmt.Sprintf("%q is not a label selector as kubectl -l takes it (e.g. team=storage,env!=prod): %v", cfg.LabelSelector.ValueString(), err))
	}
}

// List streams the NodeMaintenances that pass the filters, sorted by name.
func (l *NodeMaintenanceListResource) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	var diags diag.Diagnostics
	items, ok := l.matching(ctx, req.Config, &diags)
	if !ok {
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	stream.Results = func(push func(list.ListResult) bool) {
		for i := range items {
			if req.Limit > 0 && int64(i) >= req.Limit {
				return
			}
			if !push(listResult(ctx, req, &items[i])) {
				return
			}
		}
	}
}

// matching reads the filters and lists what passes them.
func (l *NodeMaintenanceListResource) matching(ctx context.Context, config tfsdk.Config, diags *diag.Diagnostics) ([]nmv1beta1.NodeMaintenance, bool) {
	var cfg nodeMaintenanceListConfig
	if _, ok := begin(ctx, l.clients, diags, nil, read(config, &cfg)); !ok {
		return nil, false
	}
	var opts []client.ListOption
	if s := cfg.LabelSelector.ValueString(); s != "" {
		sel, err := labels.Parse(s)
		if err != nil {
			diags.AddAttributeError(path.Root("label_selector"), "Invalid Label Selector", fmt.Sprintf("%q: %v", s, err))
			return nil, false
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	all := &nmv1beta1.NodeMaintenanceList{}
	if err := l.clients.kube.List(ctx, all, opts...); err != nil {
		l.clients.apiError(diags, "Cannot List NodeMaintenances", "Listing NodeMaintenances", err)
		return nil, false
	}
	var out []nmv1beta1.NodeMaintenance
	for _, nm := range all.Items {
		if (cfg.NodeName.IsNull() || nm.Spec.NodeName == cfg.NodeName.ValueString()) &&
			(cfg.Phase.IsNull() || string(nm.Status.Phase) == cfg.Phase.ValueString()) {
			out = append(out, nm)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, true
}

// listResult is one NodeMaintenance as a list result: its identity, a
// display name, and, when asked (-generate-config-out), the resource as a
// read after an import would find it.
func listResult(ctx context.Context, req list.ListRequest, nm *nmv1beta1.NodeMaintenance) list.ListResult {
	res := req.NewListResult(ctx)
	phase := string(nm.Status.Phase)
	if phase == "" {
		phase = "not started"
	}
	res.DisplayName = fmt.Sprintf("%s (node %s, %s)", nm.Name, nm.Spec.NodeName, phase)
	setIdentity(ctx, res.Identity, nm.Name, &res.Diagnostics)
	if !req.IncludeResource {
		return res
	}
	m := nodeMaintenanceResourceModel{
		ID:       types.StringValue(nm.Name),
		Name:     types.StringValue(nm.Name),
		NodeName: types.StringValue(nm.Spec.NodeName),
		Reason:   types.StringNull(),
		Timeouts: timeouts.Value{Object: types.ObjectNull(map[string]attr.Type{"create": types.StringType, "delete": types.StringType})},
	}
	if nm.Spec.Reason != "" {
		m.Reason = types.StringValue(nm.Spec.Reason)
	}
	drain, diags := drainBlock(ctx, nm.Spec.Drain, types.ObjectNull(drainAttrTypes))
	res.Diagnostics.Append(diags...)
	m.Drain = drain
	res.Diagnostics.Append(m.setStatus(ctx, nm)...)
	res.Diagnostics.Append(res.Resource.Set(ctx, &m)...)
	return res
}
