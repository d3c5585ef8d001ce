package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

var _ datasource.DataSourceWithConfigure = &NodeMaintenanceDataSource{}

// NewNodeMaintenanceDataSource is the constructor of the nodemaintenance data source.
func NewNodeMaintenanceDataSource() datasource.DataSource { return &NodeMaintenanceDataSource{} }

// NodeMaintenanceDataSource reads one NodeMaintenance by name.
type NodeMaintenanceDataSource struct {
	clients *clients
}

type nodeMaintenanceDataSourceModel struct {
	ID       types.String `tfsdk:"id"`
	Name     types.String `tfsdk:"name"`
	NodeName types.String `tfsdk:"node_name"`
	Reason   types.String `tfsdk:"reason"`
	statusModel
}

// Metadata names the data source type.
func (d *NodeMaintenanceDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName
}

// Schema of the nodemaintenance data source.
func (d *NodeMaintenanceDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	attrs := map[string]schema.Attribute{
		"id":        schema.StringAttribute{Computed: true, MarkdownDescription: "Name of the NodeMaintenance."},
		"name":      schema.StringAttribute{Required: true, MarkdownDescription: "Name of the NodeMaintenance to read."},
		"node_name": schema.StringAttribute{Computed: true, MarkdownDescription: "Node in maintenance."},
		"reason":    schema.StringAttribute{Computed: true, MarkdownDescription: "Why the node is in maintenance."},
	}
	dataSourceStatusAttributes(attrs)
	resp.Schema = schema.Schema{
		MarkdownDescription: "Reads one `NodeMaintenance` and its live status, for example to gate a CI job on `phase == \"Succeeded\"` " +
			"without owning the maintenance. A missing NodeMaintenance is an error.",
		Attributes: attrs,
	}
}

// Configure receives the provider's clients.
func (d *NodeMaintenanceDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.clients = configuredClients(req.ProviderData, &resp.Diagnostics)
}

// Read reads the NodeMaintenance.
func (d *NodeMaintenanceDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m nodeMaintenanceDataSourceModel
	if _, ok := begin(ctx, d.clients, &resp.Diagnostics, nil, read(req.Config, &m)); !ok {
		return
	}
	name := m.Name.ValueString()
	nm := &nmv1beta1.NodeMaintenance{}
	if err := d.clients.kube.Get(ctx, client.ObjectKey{Name: name}, nm); err != nil {
		if apierrors.IsNotFound(err) {
			resp.Diagnostics.AddAttributeError(pathName, "NodeMaintenance Not Found",
				fmt.Sprintf("There is no NodeMaintenance %q in the cluster at %s. List them with `kubectl get nm` or the nodemaintenance_list data source.", name, d.clients.cluster))
			return
		}
		d.clients.apiError(&resp.Diagnostics, "Cannot Read NodeMaintenance", fmt.Sprintf("Reading NodeMaintenance %q", name), err)
		return
	}
	m.ID = types.StringValue(nm.Name)
	m.NodeName = types.StringValue(nm.Spec.NodeName)
	m.Reason = types.StringValue(nm.Spec.Reason)
	s, diags := statusFrom(ctx, nm.Status)
	resp.Diagnostics.Append(diags...)
	m.statusModel = s
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
