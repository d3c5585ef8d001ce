package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The node-name and max-unavailable checks take their rules from
// api/v1beta1/validation; what the user reads is the provider's own message.
func TestStringValidatorMessages(t *testing.T) {
	for _, tt := range []struct {
		name      string
		validator validator.String
		value     string
		want      string // "" for accepted
	}{
		{"node name", kubernetesName{"node"}, "node02", ""},
		{"node name at the limit", kubernetesName{"node"}, strings.Repeat("a", 253), ""},
		{"empty node name", kubernetesName{"node"}, "",
			"Invalid Node Name: node_name is empty. Set it to the name of a node, as `kubectl get nodes` or `kubectl get nm` shows it."},
		{"long node name", kubernetesName{"node"}, strings.Repeat("a", 254),
			"Invalid Node Name: node_name is 254 characters long; the name of a node has at most 253."},
		{"bad node name", kubernetesName{"node"}, "Bad_Name",
			`Invalid Node Name: node_name "Bad_Name" is not a valid node name: a lowercase RFC 1123 subdomain must consist of`},
		{"bad maintenance name", kubernetesName{"NodeMaintenance"}, "Maint_1",
			`Invalid NodeMaintenance Name: node_name "Maint_1" is not a valid NodeMaintenance name: `},
		{"count", maxUnavailable{}, "2", ""},
		{"percentage", maxUnavailable{}, "20%", ""},
		{"huge percentage", maxUnavailable{}, "9000000000000000000%", ""},
		{"percentage beyond int", maxUnavailable{}, "99999999999999999999%", `Invalid Max Unavailable: node_name "99999999999999999999%" is not`},
		{"largest count", maxUnavailable{}, "2147483647", ""},
		{"count beyond int32", maxUnavailable{}, "2147483648",
			`Invalid Max Unavailable: node_name "2147483648" is not a number of nodes (like "2") or a percentage of all nodes (like "20%"), zero or more. The operator would refuse to start with it.`},
		{"negative count", maxUnavailable{}, "-1", `Invalid Max Unavailable: node_name "-1" is not a number of nodes`},
		{"negative percentage", maxUnavailable{}, "-5%", `Invalid Max Unavailable: node_name "-5%" is not a number of nodes`},
		{"words", maxUnavailable{}, "lots", `Invalid Max Unavailable: node_name "lots" is not a number of nodes`},
		{"spaces", maxUnavailable{}, " 3", `Invalid Max Unavailable: node_name " 3" is not a number of nodes`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := &validator.StringResponse{}
			tt.validator.ValidateString(context.Background(),
				validator.StringRequest{Path: path.Root("node_name"), ConfigValue: types.StringValue(tt.value)}, resp)
			var got string
			if resp.Diagnostics.HasError() {
				d := resp.Diagnostics.Errors()[0]
				got = d.Summary() + ": " + d.Detail()
			}
			if tt.want == "" && got != "" || !strings.HasPrefix(got, tt.want) {
				t.Fatalf("%q: got %q, want %q", tt.value, got, tt.want)
			}
		})
	}
}
