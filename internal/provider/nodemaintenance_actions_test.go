package provider

import (
	"context"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
)

// The provider serves its actions, its list resource and the resource's
// identity through the plugin protocol, with no schema error, and the drain
// action's drain block has every attribute of the resource's.
func TestProviderServesActionsListAndIdentity(t *testing.T) {
	ctx := context.Background()
	server := providerserver.NewProtocol6(New("test")())()
	schemas, err := server.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range schemas.Diagnostics {
		t.Errorf("schema diagnostic: %s: %s", d.Summary, d.Detail)
	}
	for _, name := range []string{"nodemaintenance_drain", "nodemaintenance_restore"} {
		if schemas.ActionSchemas[name] == nil {
			t.Errorf("no action %s", name)
		}
	}
	if schemas.ListResourceSchemas["nodemaintenance"] == nil {
		t.Error("no list resource nodemaintenance")
	}
	var drainAttrs []string
	for _, a := range schemas.ActionSchemas["nodemaintenance_drain"].Schema.Block.Attributes {
		if a.Name == "drain" {
			for _, n := range a.NestedType.Attributes {
				drainAttrs = append(drainAttrs, n.Name)
			}
		}
	}
	for _, f := range drainFields {
		if !slices.Contains(drainAttrs, f.name) {
			t.Errorf("the drain action's drain block has no %s (it has %v)", f.name, drainAttrs)
		}
	}
	ids, err := server.GetResourceIdentitySchemas(ctx, &tfprotov6.GetResourceIdentitySchemasRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id := ids.IdentitySchemas["nodemaintenance"]
	if id == nil || len(id.IdentityAttributes) != 1 || id.IdentityAttributes[0].Name != "name" || !id.IdentityAttributes[0].RequiredForImport {
		t.Errorf("the nodemaintenance identity is %+v, want one attribute, name, required for import", id)
	}
}

func TestMaintenanceNameAndActionTimeout(t *testing.T) {
	if got := maintenanceName(types.StringValue(""), types.StringValue("node02")); got != "maintain-node02" {
		t.Errorf("default name = %q", got)
	}
	if got := maintenanceName(types.StringValue("mine"), types.StringValue("node02")); got != "mine" {
		t.Errorf("given name = %q", got)
	}
	if got := actionTimeout(types.StringValue("45m"), defaultCreateTimeout); got.Minutes() != 45 {
		t.Errorf("timeout 45m = %s", got)
	}
	if got := actionTimeout(types.StringNull(), defaultDeleteTimeout); got != defaultDeleteTimeout {
		t.Errorf("no timeout = %s, want the default %s", got, defaultDeleteTimeout)
	}
}
