// Package provider is the nodemaintenance Terraform/OpenTofu provider: the
// nodemaintenance resource puts a node into maintenance through the
// NodeMaintenance custom resource and waits for the operator to drain it;
// destroy restores the node. Data sources serve CI gating.
package provider

import (
	"context"
	"fmt"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/list"

	"github.com/go-logr/logr"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/kubeconfig"
)

var (
	_ provider.Provider                  = &NodeMaintenanceProvider{}
	_ provider.ProviderWithListResources = &NodeMaintenanceProvider{}
	_ provider.ProviderWithActions       = &NodeMaintenanceProvider{}
)

// New returns a constructor of the provider for providerserver.
func New(version string) func() provider.Provider {
	// The provider reports through Terraform's diagnostics and tflog; the
	// controller-runtime client it uses would otherwise print, half a minute
	// into a long apply, a warning with a stack trace that its logger was
	// never set.
	ctrllog.SetLogger(logr.Discard())
	return func() provider.Provider { return &NodeMaintenanceProvider{version: version} }
}

// NodeMaintenanceProvider is the provider implementation.
type NodeMaintenanceProvider struct {
	version string
}

// providerModel maps the provider block; names match the hashicorp/kubernetes provider.
type providerModel struct {
	ConfigPath            types.String `tfsdk:"config_path"`
	ConfigPaths           types.List   `tfsdk:"config_paths"`
	ConfigContext         types.String `tfsdk:"config_context"`
	ConfigContextAuthInfo types.String `tfsdk:"config_context_auth_info"`
	ConfigContextCluster  types.String `tfsdk:"config_context_cluster"`
	Host                  types.String `tfsdk:"host"`
	Token                 types.String `tfsdk:"token"`
	ClusterCACertificate  types.String `tfsdk:"cluster_ca_certificate"`
	ClientCertificate     types.String `tfsdk:"client_certificate"`
	ClientKey             types.String `tfsdk:"client_key"`
	Insecure              types.Bool   `tfsdk:"insecure"`
	TLSServerName         types.String `tfsdk:"tls_server_name"`
	ProxyURL              types.String `tfsdk:"proxy_url"`
	Exec                  []execModel  `tfsdk:"exec"`
}

type execModel struct {
	APIVersion types.String `tfsdk:"api_version"`
	Command    types.String `tfsdk:"command"`
	Args       types.List   `tfsdk:"args"`
	Env        types.Map    `tfsdk:"env"`
}

// Metadata names the provider.
func (p *NodeMaintenanceProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "nodemaintenance"
	resp.Version = p.version
}

// Schema is the provider block.
func (p *NodeMaintenanceProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Puts Kubernetes nodes into maintenance declaratively through the `NodeMaintenance` " +
			"custom resource (`nodemaintenance.medik8s.io/v1beta1`). Cluster access is configured like the " +
			"`hashicorp/kubernetes` provider: attributes, `KUBE_*` environment variables, `KUBECONFIG`, or in-cluster config.",
		Attributes: map[string]schema.Attribute{
			"config_path": schema.StringAttribute{Optional: true,
				MarkdownDescription: "Path to a kubeconfig file. Environment: `KUBE_CONFIG_PATH`; `KUBECONFIG` is used when no path is set."},
			"config_paths": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "Paths to kubeconfig files merged in order. Cannot be combined with `config_path`. Environment: `KUBE_CONFIG_PATHS`."},
			"config_context": schema.StringAttribute{Optional: true,
				MarkdownDescription: "Context of the kubeconfig to use instead of its current context. Environment: `KUBE_CTX`."},
			"config_context_auth_info": schema.StringAttribute{Optional: true,
				MarkdownDescription: "User of the kubeconfig to use. Environment: `KUBE_CTX_AUTH_INFO`."},
			"config_context_cluster": schema.StringAttribute{Optional: true,
				MarkdownDescription: "Cluster of the kubeconfig to use. Environment: `KUBE_CTX_CLUSTER`."},
			"host": schema.StringAttribute{Optional: true,
				MarkdownDescription: "Address of the Kubernetes API server (`https://host:port`). Environment: `KUBE_HOST`."},
			"token": schema.StringAttribute{Optional: true, Sensitive: true,
				MarkdownDescription: "Bearer token. Cannot be combined with `exec`. Environment: `KUBE_TOKEN`."},
			"cluster_ca_certificate": schema.StringAttribute{Optional: true,
				MarkdownDescription: "PEM-encoded CA certificate of the API server. Environment: `KUBE_CLUSTER_CA_CERT_DATA`."},
			"client_certificate": schema.StringAttribute{Optional: true,
				MarkdownDescription: "PEM-encoded client certificate for TLS authentication. Environment: `KUBE_CLIENT_CERT_DATA`."},
			"client_key": schema.StringAttribute{Optional: true, Sensitive: true,
				MarkdownDescription: "PEM-encoded private key of `client_certificate`. Environment: `KUBE_CLIENT_KEY_DATA`."},
			"insecure": schema.BoolAttribute{Optional: true,
				MarkdownDescription: "Skip verification of the API server's certificate. Environment: `KUBE_INSECURE`."},
			"tls_server_name": schema.StringAttribute{Optional: true,
				MarkdownDescription: "Server name to verify the API server's certificate against. Environment: `KUBE_TLS_SERVER_NAME`."},
			"proxy_url": schema.StringAttribute{Optional: true,
				MarkdownDescription: "URL of a proxy for all requests to the API server. Environment: `KUBE_PROXY_URL`."},
		},
		Blocks: map[string]schema.Block{
			"exec": schema.ListNestedBlock{
				MarkdownDescription: "Credential plugin that prints an ExecCredential (for example `aws eks get-token`). Cannot be combined with `token`.",
				NestedObject: schema.NestedBlockObject{Attributes: map[string]schema.Attribute{
					"api_version": schema.StringAttribute{Required: true,
						MarkdownDescription: "API version of the ExecCredential, `client.authentication.k8s.io/v1` or `client.authentication.k8s.io/v1beta1`."},
					"command": schema.StringAttribute{Required: true, MarkdownDescription: "Command to run."},
					"args":    schema.ListAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: "Arguments of the command."},
					"env": schema.MapAttribute{Optional: true, ElementType: types.StringType, Sensitive: true,
						MarkdownDescription: "Environment variables of the command."},
				}},
			},
		},
	}
}

// Configure turns the provider block into a Kubernetes client. It makes no
// API call: a plan that does not need the cluster never touches it.
func (p *NodeMaintenanceProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if !m.known() {
		// Values that come from other resources are unknown during the first
		// plan; resources then report that they cannot reach the cluster yet.
		return
	}
	cfg := kubeconfig.Config{
		ConfigPath:            m.ConfigPath.ValueString(),
		ConfigContext:         m.ConfigContext.ValueString(),
		ConfigContextAuthInfo: m.ConfigContextAuthInfo.ValueString(),
		ConfigContextCluster:  m.ConfigContextCluster.ValueString(),
		Host:                  m.Host.ValueString(),
		Token:                 m.Token.ValueString(),
		ClusterCACertificate:  m.ClusterCACertificate.ValueString(),
		ClientCertificate:     m.ClientCertificate.ValueString(),
		ClientKey:             m.ClientKey.ValueString(),
		Insecure:              m.Insecure.ValueBoolPointer(),
		TLSServerName:         m.TLSServerName.ValueString(),
		ProxyURL:              m.ProxyURL.ValueString(),
	}
	resp.Diagnostics.Append(m.ConfigPaths.ElementsAs(ctx, &cfg.ConfigPaths, false)...)
	if len(m.Exec) > 0 {
		e := m.Exec[0]
		cfg.Exec = &kubeconfig.ExecConfig{APIVersion: e.APIVersion.ValueString(), Command: e.Command.ValueString()}
		resp.Diagnostics.Append(e.Args.ElementsAs(ctx, &cfg.Exec.Args, false)...)
		resp.Diagnostics.Append(e.Env.ElementsAs(ctx, &cfg.Exec.Env, false)...)
	}
	if resp.Diagnostics.HasError() {
		return
	}
	cfg, problems := cfg.WithEnv(os.LookupEnv)
	addProblems(&resp.Diagnostics, problems)
	if resp.Diagnostics.HasError() {
		return
	}
	restConfig, problems := cfg.RESTConfig()
	addProblems(&resp.Diagnostics, problems)
	if resp.Diagnostics.HasError() {
		return
	}
	cluster := kubeconfig.Describe(restConfig, kubeconfig.LoadedContext(cfg))
	clients, err := newClients(restConfig, p.version, cluster)
	if err != nil {
		resp.Diagnostics.AddError("Invalid Kubernetes Client Configuration",
			"The provider could not build a Kubernetes client from its configuration: "+err.Error())
		return
	}
	// Which build did it: the same version is in the User-Agent of every API
	// request, so the cluster's audit log can be matched with this log.
	tflog.Info(ctx, fmt.Sprintf("terraform-provider-nodemaintenance %s configured for cluster %s", p.version, cluster),
		map[string]any{"version": p.version, "user_agent": userAgent(p.version)})
	resp.ResourceData = clients
	resp.DataSourceData = clients
	resp.ActionData = clients
	resp.ListResourceData = clients
}

func (m providerModel) known() bool {
	for _, v := range []interface{ IsUnknown() bool }{m.ConfigPath, m.ConfigPaths, m.ConfigContext, m.ConfigContextAuthInfo,
		m.ConfigContextCluster, m.Host, m.Token, m.ClusterCACertificate, m.ClientCertificate, m.ClientKey, m.Insecure,
		m.TLSServerName, m.ProxyURL} {
		if v.IsUnknown() {
			return false
		}
	}
	for _, e := range m.Exec {
		if e.APIVersion.IsUnknown() || e.Command.IsUnknown() || e.Args.IsUnknown() || e.Env.IsUnknown() {
			return false
		}
	}
	return true
}

// Resources lists the resource types.
func (p *NodeMaintenanceProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{NewNodeMaintenanceResource, NewOperatorResource, NewRolloutResource}
}

// ListResources lists the list resource types (`terraform query`, Terraform 1.14 and later).
func (p *NodeMaintenanceProvider) ListResources(context.Context) []func() list.ListResource {
	return []func() list.ListResource{NewNodeMaintenanceListResource}
}

// Actions lists the action types (Terraform 1.14 and later).
func (p *NodeMaintenanceProvider) Actions(context.Context) []func() action.Action {
	return []func() action.Action{NewDrainAction, NewRestoreAction}
}

// DataSources lists the data source types.
func (p *NodeMaintenanceProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{NewNodeMaintenanceDataSource, NewNodeMaintenanceListDataSource, NewDrainPreviewDataSource, NewRolloutDataSource}
}
