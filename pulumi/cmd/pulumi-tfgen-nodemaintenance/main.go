// Command pulumi-tfgen-nodemaintenance generates the Pulumi package schema and
// the bridge metadata of the nodemaintenance provider:
//
//	pulumi-tfgen-nodemaintenance schema --out cmd/pulumi-resource-nodemaintenance
//
// Run it through `make pulumi-generate`, which also normalises the output.
package main

import (
	"github.com/pulumi/pulumi-terraform-bridge/v3/pkg/pf/tfgen"

	nmpulumi "github.com/nodemaintenance/terraform-provider-nodemaintenance/pulumi"
)

func main() {
	tfgen.Main(nmpulumi.Name, nmpulumi.Provider())
}
