// Package pulumi bridges the nodemaintenance Terraform provider to Pulumi with
// the static Terraform bridge (pulumi-terraform-bridge, Plugin Framework flavour).
// The same ProviderInfo drives both binaries: pulumi-tfgen-nodemaintenance
// writes the Pulumi package schema and the bridge metadata from it, and
// pulumi-resource-nodemaintenance serves the provider to the Pulumi engine with
// those files embedded.
package pulumi

import (
	"context"
	_ "embed"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	tfprovider "github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	pftfbridge "github.com/pulumi/pulumi-terraform-bridge/v3/pkg/pf/tfbridge"
	"github.com/pulumi/pulumi-terraform-bridge/v3/pkg/tfbridge"
	pschema "github.com/pulumi/pulumi/pkg/v3/codegen/schema"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/provider"
)

// Name is the Pulumi package name, and the Terraform provider's type name.
const Name = "nodemaintenance"

// Version of the bridged provider, a semantic version as Pulumi requires. The
// release build sets it with
// -ldflags "-X github.com/nodemaintenance/terraform-provider-nodemaintenance/pulumi.Version=1.2.3"
// (`make pulumi-provider PULUMI_PROVIDER_VERSION=1.2.3`). The generator leaves
// it out of schema.json, so the committed schema does not change with releases.
var Version = "0.1.0-dev"

// The published names of the SDKs that `make pulumi-sdks` generates from the
// schema into pulumi/sdk/, one per language.
const (
	// GoModulePath is the Go module of the Go SDK (pulumi/sdk/go/go.mod, a
	// module of its own so that programs importing it do not depend on the
	// bridge); GoImportPath is its package.
	GoModulePath = "github.com/nodemaintenance/terraform-provider-nodemaintenance/pulumi/sdk/go"
	GoImportPath = GoModulePath + "/" + Name
	// NodePackage is the npm package of the TypeScript/JavaScript SDK.
	NodePackage = "@nodemaintenance/" + Name
	// PythonPackage is the Python distribution and import name of the Python SDK.
	PythonPackage = "pulumi_" + Name
)

// bridgeMetadata is written by pulumi-tfgen-nodemaintenance next to schema.json.
//
//go:embed cmd/pulumi-resource-nodemaintenance/bridge-metadata.json
var bridgeMetadata []byte

// Tokens of the Pulumi resources and functions, one per Terraform resource and
// data source, all in the package's index module. Programs should use these
// canonical forms (nodemaintenance:index/nodeMaintenance:NodeMaintenance): the
// bridge looks tokens up exactly, and `pulumi import` fails with the short form
// nodemaintenance:index:NodeMaintenance that Pulumi YAML also accepts.
var (
	NodeMaintenanceToken        = tfbridge.MakeResource(Name, "index", "NodeMaintenance")
	OperatorToken               = tfbridge.MakeResource(Name, "index", "Operator")
	RolloutToken                = tfbridge.MakeResource(Name, "index", "Rollout")
	GetNodeMaintenanceToken     = tfbridge.MakeDataSource(Name, "index", "getNodeMaintenance")
	GetNodeMaintenanceListToken = tfbridge.MakeDataSource(Name, "index", "getNodeMaintenanceList")
	GetDrainPreviewToken        = tfbridge.MakeDataSource(Name, "index", "getDrainPreview")
	GetRolloutToken             = tfbridge.MakeDataSource(Name, "index", "getRollout")
)

// Provider is the mapping from the Terraform provider to the Pulumi package.
//
// Timeouts: the engine's customTimeouts resource option never reaches a Plugin
// Framework provider through the bridge (it ignores the timeout the engine
// sends). The Terraform resources read their limits from their `timeouts`
// block, and the bridge maps that single nested block to an ordinary input
// property, `timeouts: {create: 30m, delete: 10m}` in Pulumi YAML, so the
// limits are set like any other property.
func Provider() tfbridge.ProviderInfo {
	p := provider.New(Version)()
	return tfbridge.ProviderInfo{
		P:           pftfbridge.ShimProvider(p),
		Name:        Name,
		DisplayName: "Node Maintenance",
		Publisher:   "nodemaintenance",
		Version:     Version,
		Description: "Put Kubernetes nodes into maintenance declaratively: cordon, taint and drain through the NodeMaintenance custom resource.",
		Keywords:    []string{"kubernetes", "maintenance", "drain", "category/infrastructure"},
		License:     "Apache-2.0",
		Homepage:    "https://github.com/nodemaintenance/terraform-provider-nodemaintenance",
		Repository:  "https://github.com/nodemaintenance/terraform-provider-nodemaintenance",
		GitHubOrg:   "nodemaintenance",
		// The Terraform provider is Apache-2.0 too (the bridge's default is
		// MPL 2.0, which the SDK READMEs would then claim).
		TFProviderLicense: ref(tfbridge.Apache20LicenseType),
		// PluginDownloadURL is left unset until the plugin is released: the
		// engine would otherwise try to download the plugin from a URL that
		// serves nothing yet. Until then programs name the plugin's directory
		// (Pulumi.yaml plugins.providers[].path, or the Automation API's
		// workspace.Project.Plugins). A release sets it to where the release
		// archives are published, then regenerates the schema and the SDKs.
		//
		// RespectSchemaVersion: the SDKs carry the version that
		// `make pulumi-sdks` gives the schema (PULUMI_PROVIDER_VERSION, the
		// plugin's Version), and ask the engine for that plugin version,
		// instead of a placeholder a release script would replace.
		Golang: &tfbridge.GolangInfo{
			ImportBasePath:                 GoImportPath,
			ModulePath:                     GoModulePath,
			GenerateResourceContainerTypes: true,
			RespectSchemaVersion:           true,
		},
		JavaScript: &tfbridge.JavaScriptInfo{PackageName: NodePackage, RespectSchemaVersion: true},
		Python: &tfbridge.PythonInfo{
			PackageName:          PythonPackage,
			PyProject:            struct{ Enabled bool }{Enabled: true},
			RespectSchemaVersion: true,
		},
		Resources: map[string]*tfbridge.ResourceInfo{
			"nodemaintenance":          {Tok: NodeMaintenanceToken},
			"nodemaintenance_operator": {Tok: OperatorToken},
			"nodemaintenance_rollout": {Tok: RolloutToken, Fields: map[string]*tfbridge.SchemaInfo{
				// A list of endpoints, named as the API names it (not "notifies").
				"notify": {Name: "notify"},
			}},
		},
		DataSources: map[string]*tfbridge.DataSourceInfo{
			"nodemaintenance":               {Tok: GetNodeMaintenanceToken},
			"nodemaintenance_list":          {Tok: GetNodeMaintenanceListToken},
			"nodemaintenance_drain_preview": {Tok: GetDrainPreviewToken},
			"nodemaintenance_rollout":       {Tok: GetRolloutToken},
		},
		// The pages in docs/ are written for Terraform users (HCL examples,
		// `terraform import`), and their HCL cannot be converted offline, so
		// `make pulumi-generate` skips them. Resources and functions are
		// described by their Terraform schema instead, as every argument and
		// attribute already is.
		SchemaPostProcessor: func(spec *pschema.PackageSpec) { describeFromSchema(context.Background(), p, spec) },
		MetadataInfo:        tfbridge.NewProviderMetadata(bridgeMetadata),
	}
}

// pulumiNotes are appended to the descriptions where Pulumi behaves otherwise
// than Terraform.
var pulumiNotes = map[string]string{
	// The Plugin Framework bridge drops the state a Create returns with an
	// error (pulumi-terraform-bridge v3.120.0), so Terraform's tainted resource
	// has no Pulumi counterpart.
	"nodemaintenance": "\n\nUnder Pulumi, unlike Terraform, a create that fails (`Failed`, or the create timeout) is not kept in the stack: " +
		"the `NodeMaintenance` stays in the cluster, `pulumi destroy` does not remove it and the next `pulumi up` fails " +
		"because it already exists. Adopt it with " +
		"`pulumi import --protect=false nodemaintenance:index/nodeMaintenance:NodeMaintenance <resource> <name>` " +
		"(then `pulumi up` carries on with it and `pulumi destroy` restores the node), or delete it with `kubectl delete nm <name>`.",
	"nodemaintenance_rollout": "\n\nUnder Pulumi, unlike Terraform, a create that fails (`Halted`, or the create timeout) is not kept in the stack: " +
		"the `NodeMaintenanceRollout` stays in the cluster, `pulumi destroy` does not remove it and the next `pulumi up` fails " +
		"because it already exists. Adopt it with " +
		"`pulumi import --protect=false nodemaintenance:index/rollout:Rollout <resource> <name>` " +
		"(then `pulumi destroy` restores its nodes), or delete it with `kubectl delete nmr <name>`, which restores them.",
}

// describeFromSchema gives every resource and function of spec that has no
// description the MarkdownDescription of its Terraform schema.
func describeFromSchema(ctx context.Context, p tfprovider.Provider, spec *pschema.PackageSpec) {
	info := Provider()
	var meta tfprovider.MetadataResponse
	p.Metadata(ctx, tfprovider.MetadataRequest{}, &meta)
	for _, newResource := range p.Resources(ctx) {
		r := newResource()
		var md resource.MetadataResponse
		r.Metadata(ctx, resource.MetadataRequest{ProviderTypeName: meta.TypeName}, &md)
		var sch resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &sch)
		if mapped, ok := info.Resources[md.TypeName]; ok {
			tok := string(mapped.Tok)
			if res, ok := spec.Resources[tok]; ok && res.Description == "" {
				res.Description = sch.Schema.MarkdownDescription + pulumiNotes[md.TypeName]
				spec.Resources[tok] = res
			}
		}
	}
	for _, newDataSource := range p.DataSources(ctx) {
		d := newDataSource()
		var md datasource.MetadataResponse
		d.Metadata(ctx, datasource.MetadataRequest{ProviderTypeName: meta.TypeName}, &md)
		var sch datasource.SchemaResponse
		d.Schema(ctx, datasource.SchemaRequest{}, &sch)
		if mapped, ok := info.DataSources[md.TypeName]; ok {
			tok := string(mapped.Tok)
			if fn, ok := spec.Functions[tok]; ok && fn.Description == "" {
				fn.Description = sch.Schema.MarkdownDescription
				spec.Functions[tok] = fn
			}
		}
	}
}

func ref[T any](v T) *T { return &v }
