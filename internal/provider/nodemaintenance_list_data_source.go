package provider

import (
	"context"
	"regexp"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

var _ datasource.DataSourceWithConfigure = &NodeMaintenanceListDataSource{}

var pathName = path.Root("name")

// NewNodeMaintenanceListDataSource is the constructor of the nodemaintenance_list data source.
func NewNodeMaintenanceListDataSource() datasource.DataSource {
	return &NodeMaintenanceListDataSource{}
}

// NodeMaintenanceListDataSource lists NodeMaintenances, optionally filtered.
type NodeMaintenanceListDataSource struct {
	clients *clients
}

type nodeMaintenanceListModel struct {
	ID           types.String `tfsdk:"id"`
	Phase        types.String `tfsdk:"phase"`
	NodeName     types.String `tfsdk:"node_name"`
	Condition    types.String `tfsdk:"condition"`
	Items        types.List   `tfsdk:"items"`
	Names        types.List   `tfsdk:"names"`
	AllSucceeded types.Bool   `tfsdk:"all_succeeded"`
}

// Metadata names the data source type.
func (d *NodeMaintenanceListDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_list"
}

// Schema of the nodemaintenance_list data source.
func (d *NodeMaintenanceListDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Lists the `NodeMaintenance` objects of the cluster, optionally only those of one phase, one node or one condition, " +
			"so that a CI pipeline can gate on maintenance phases without owning the resources.",
		Attributes: map[string]schema.Attribute{
			"id":        schema.StringAttribute{Computed: true, MarkdownDescription: "A fixed identifier of the listing."},
			"phase":     schema.StringAttribute{Optional: true, MarkdownDescription: phaseFilterDescription, Validators: phaseFilterValidators},
			"node_name": schema.StringAttribute{Optional: true, MarkdownDescription: "Only the NodeMaintenance of this node."},
			"condition": schema.StringAttribute{Optional: true,
				MarkdownDescription: "Only NodeMaintenances with this condition, as `kubectl wait --for=condition=` takes it: `Drained` " +
					"(status `True`) or `TYPE=STATUS`, e.g. `Drained=False`, `LeaseHeld=True`, `Queued`. The types are `Queued`, `Cordoned`, `LeaseHeld` and `Drained`.",
				Validators: []validator.String{stringvalidator.RegexMatches(conditionFilterPattern,
					"must be a condition type (Queued, Cordoned, LeaseHeld, Drained), optionally followed by =True, =False or =Unknown")}},
			"items": schema.ListAttribute{Computed: true, ElementType: types.ObjectType{AttrTypes: nodeMaintenanceAttrTypes},
				MarkdownDescription: "The NodeMaintenances, sorted by name, each with `name`, `node_name`, `reason` and every status attribute of the `nodemaintenance` data source."},
			"names": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Names of the listed NodeMaintenances, sorted."},
			"all_succeeded": schema.BoolAttribute{Computed: true,
				MarkdownDescription: "True when at least one NodeMaintenance is listed and every listed one is `Succeeded`. An empty list is not success."},
		},
	}
}

// Configure receives the provider's clients.
func (d *NodeMaintenanceListDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.clients = configuredClients(req.ProviderData, &resp.Diagnostics)
}

// Read lists and filters.
func (d *NodeMaintenanceListDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m nodeMaintenanceListModel
	if _, ok := begin(ctx, d.clients, &resp.Diagnostics, nil, read(req.Config, &m)); !ok {
		return
	}
	list := &nmv1beta1.NodeMaintenanceList{}
	if err := d.clients.kube.List(ctx, list); err != nil {
		d.clients.apiError(&resp.Diagnostics, "Cannot List NodeMaintenances", "Listing NodeMaintenances", err)
		return
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	items := []attr.Value{}
	names := []string{}
	allSucceeded := true
	for i := range list.Items {
		nm := &list.Items[i]
		if !m.Phase.IsNull() && string(nm.Status.Phase) != m.Phase.ValueString() {
			continue
		}
		if !m.NodeName.IsNull() && nm.Spec.NodeName != m.NodeName.ValueString() {
			continue
		}
		if !m.Condition.IsNull() && !hasCondition(nm, m.Condition.ValueString()) {
			continue
		}
		obj, diags := objectFrom(ctx, nm)
		resp.Diagnostics.Append(diags...)
		items = append(items, obj)
		names = append(names, nm.Name)
		allSucceeded = allSucceeded && nm.Status.Phase == nmv1beta1.MaintenanceSucceeded
	}
	itemList, diags := types.ListValue(types.ObjectType{AttrTypes: nodeMaintenanceAttrTypes}, items)
	resp.Diagnostics.Append(diags...)
	nameList, diags := types.ListValueFrom(ctx, types.StringType, names)
	resp.Diagnostics.Append(diags...)
	m.ID = types.StringValue("nodemaintenances")
	m.Items, m.Names = itemList, nameList
	m.AllSucceeded = types.BoolValue(len(names) > 0 && allSucceeded)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// phaseFilterDescription and phaseFilterValidators are the phase filter of
// the list data source and the list resource.
const phaseFilterDescription = "Only NodeMaintenances in this phase: `Running`, `Succeeded` or `Failed`."

var phaseFilterValidators = []validator.String{stringvalidator.OneOf(string(nmv1beta1.MaintenanceRunning),
	string(nmv1beta1.MaintenanceSucceeded), string(nmv1beta1.MaintenanceFailed))}

// conditionFilterPattern is the condition filter: TYPE or TYPE=STATUS.
var conditionFilterPattern = regexp.MustCompile(`^(` + nmv1beta1.ConditionQueued + `|` + nmv1beta1.ConditionCordoned + `|` + nmv1beta1.ConditionLeaseHeld + `|` +
	nmv1beta1.ConditionDrained + `)(=(True|False|Unknown))?$`)

// hasCondition reports whether nm has the condition of filter (TYPE, meaning
// TYPE=True, or TYPE=STATUS). A condition that is not set matches only
// TYPE=Unknown.
func hasCondition(nm *nmv1beta1.NodeMaintenance, filter string) bool {
	typ, status, ok := strings.Cut(filter, "=")
	if !ok {
		status = string(metav1.ConditionTrue)
	}
	c := meta.FindStatusCondition(nm.Status.Conditions, typ)
	if c == nil {
		return status == string(metav1.ConditionUnknown)
	}
	return string(c.Status) == status
}
