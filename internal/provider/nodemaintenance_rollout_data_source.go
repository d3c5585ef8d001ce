package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var _ datasource.DataSourceWithConfigure = &RolloutDataSource{}

// NewRolloutDataSource is the constructor of the nodemaintenance_rollout data source.
func NewRolloutDataSource() datasource.DataSource { return &RolloutDataSource{} }

// RolloutDataSource reads one NodeMaintenanceRollout by name.
type RolloutDataSource struct {
	clients *clients
}

type rolloutDataSourceModel struct {
	ID   types.String `tfsdk:"id"`
	Name types.String `tfsdk:"name"`
	rolloutStatusModel
}

// Metadata names the data source type.
func (d *RolloutDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_rollout"
}

// Schema of the nodemaintenance_rollout data source.
func (d *RolloutDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	attrs := map[string]schema.Attribute{
		"id":   schema.StringAttribute{Computed: true, MarkdownDescription: "Name of the NodeMaintenanceRollout."},
		"name": schema.StringAttribute{Required: true, MarkdownDescription: "Name of the NodeMaintenanceRollout to read."},
	}
	rolloutStatusAttributes.dataSourceAttributes(attrs)
	resp.Schema = schema.Schema{
		MarkdownDescription: "Reads one `NodeMaintenanceRollout` and its live status, for example to gate a CI job on " +
			"`phase == \"Succeeded\"` or on `failed == 0` without owning the rollout. A missing rollout is an error.",
		Attributes: attrs,
	}
}

// Configure receives the provider's clients.
func (d *RolloutDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.clients = configuredClients(req.ProviderData, &resp.Diagnostics)
}

// Read reads the rollout.
func (d *RolloutDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m rolloutDataSourceModel
	if _, ok := begin(ctx, d.clients, &resp.Diagnostics, nil, read(req.Config, &m)); !ok {
		return
	}
	name := m.Name.ValueString()
	obj := &rollout{}
	if err := d.clients.kube.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			resp.Diagnostics.AddAttributeError(pathName, "NodeMaintenanceRollout Not Found",
				fmt.Sprintf("There is no NodeMaintenanceRollout %q in the cluster at %s. List them with `kubectl get nmr`.", name, d.clients.cluster))
			return
		}
		d.clients.rolloutAPIError(&resp.Diagnostics, "Cannot Read NodeMaintenanceRollout", fmt.Sprintf("Reading NodeMaintenanceRollout %q", name), err)
		return
	}
	m.ID = types.StringValue(obj.Name)
	s, diags := rolloutStatusFrom(ctx, obj.Status)
	resp.Diagnostics.Append(diags...)
	m.rolloutStatusModel = s
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
