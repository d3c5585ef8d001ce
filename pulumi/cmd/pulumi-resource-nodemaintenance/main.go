// Command pulumi-resource-nodemaintenance is the Pulumi resource provider
// plugin for nodemaintenance: the Terraform provider served to the Pulumi
// engine by the static Terraform bridge.
package main

import (
	"context"
	_ "embed"

	pftfbridge "github.com/pulumi/pulumi-terraform-bridge/v3/pkg/pf/tfbridge"

	nmpulumi "github.com/nodemaintenance/terraform-provider-nodemaintenance/pulumi"
)

// schema is written by `make pulumi-generate` (pulumi-tfgen-nodemaintenance).
//
//go:embed schema.json
var schema []byte

func main() {
	pftfbridge.Main(context.Background(), nmpulumi.Name, nmpulumi.Provider(), pftfbridge.ProviderMetadata{PackageSchema: schema})
}
