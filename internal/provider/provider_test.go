package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// validateProviderConfig runs the provider's config validation as Terraform
// does, through the plugin protocol, on a provider block whose attributes are
// all null and that has the given exec blocks.
func validateProviderConfig(t *testing.T, exec ...map[string]tftypes.Value) []*tfprotov6.Diagnostic {
	t.Helper()
	ctx := context.Background()
	p := New("test")()
	schemaResp := &provider.SchemaResponse{}
	p.Schema(ctx, provider.SchemaRequest{}, schemaResp)
	typ := schemaResp.Schema.Type().TerraformType(ctx).(tftypes.Object)
	execType := typ.AttributeTypes["exec"].(tftypes.List)
	values := map[string]tftypes.Value{}
	for name, attrType := range typ.AttributeTypes {
		values[name] = tftypes.NewValue(attrType, nil)
	}
	blocks := make([]tftypes.Value, 0, len(exec))
	for _, e := range exec {
		blocks = append(blocks, tftypes.NewValue(execType.ElementType, e))
	}
	values["exec"] = tftypes.NewValue(execType, blocks)
	config, err := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, values))
	if err != nil {
		t.Fatal(err)
	}
	server := providerserver.NewProtocol6(p)()
	resp, err := server.ValidateProviderConfig(ctx, &tfprotov6.ValidateProviderConfigRequest{Config: &config})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Diagnostics
}

func execBlock(command string) map[string]tftypes.Value {
	return map[string]tftypes.Value{
		"api_version": tftypes.NewValue(tftypes.String, "client.authentication.k8s.io/v1"),
		"command":     tftypes.NewValue(tftypes.String, command),
		"args":        tftypes.NewValue(tftypes.List{ElementType: tftypes.String}, nil),
		"env":         tftypes.NewValue(tftypes.Map{ElementType: tftypes.String}, nil),
	}
}

// One credential plugin at most: a second exec block is a configuration
// error, not silently ignored.
func TestProviderRefusesASecondExecBlock(t *testing.T) {
	for _, tt := range []struct {
		name    string
		exec    []map[string]tftypes.Value
		wantErr string
	}{
		{"none", nil, ""},
		{"one", []map[string]tftypes.Value{execBlock("aws")}, ""},
		{"two", []map[string]tftypes.Value{execBlock("aws"), execBlock("gcloud")}, "must contain at most 1 elements"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var errs []string
			for _, d := range validateProviderConfig(t, tt.exec...) {
				if d.Severity == tfprotov6.DiagnosticSeverityError {
					errs = append(errs, d.Summary+": "+d.Detail)
				}
			}
			got := strings.Join(errs, "\n")
			if tt.wantErr == "" && got != "" || !strings.Contains(got, tt.wantErr) {
				t.Fatalf("errors %q, want %q", got, tt.wantErr)
			}
		})
	}
}
