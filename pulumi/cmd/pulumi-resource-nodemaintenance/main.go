// Command pulumi-resource-nodemaintenance is the Pulumi resource provider
// plugin for nodemaintenance: the Terraform provider served to the Pulumi
// engine by the static Terraform bridge.
package main

import (
	"context"
	_ "embed"
	// Rollout windows' time zones are checked at preview time, on machines
	// that may lack /usr/share/zoneinfo.
	_ "time/tzdata"

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
