// Command terraform-provider-nodemaintenance serves the nodemaintenance
// provider to Terraform and OpenTofu.
package main

import (
	"context"
	"flag"
	"log"
	// Rollout windows' time zones are checked at plan time, on machines
	// that may lack /usr/share/zoneinfo.
	_ "time/tzdata"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/provider"
)

// version is set by the release build (-ldflags "-X main.version=...").
var version = "dev"

// Address is where the registry serves the provider.
const Address = "registry.terraform.io/nodemaintenance/nodemaintenance"

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "Run the provider with support for debuggers such as delve (prints TF_REATTACH_PROVIDERS).")
	flag.Parse()
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{Address: Address, Debug: debug})
	if err != nil {
		log.Fatal(err.Error())
	}
}
