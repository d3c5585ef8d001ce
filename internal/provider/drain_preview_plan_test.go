package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
)

// A plan that cannot preview says why, as a warning, never an error.
func TestPlanPreviewUnavailableIsAWarning(t *testing.T) {
	for _, tt := range []struct {
		name, node, want string
	}{
		{"unknown node name", "", "node_name is not known until apply"},
		{"provider not configured", "node02", "the provider's cluster settings are not known yet"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var diags diag.Diagnostics
			previewWarnings(context.Background(), nil, tt.node, types.ObjectNull(drainAttrTypes), &diags)
			if diags.HasError() || diags.WarningsCount() != 1 {
				t.Fatalf("diagnostics %v, want one warning", diags)
			}
			if w := diags.Warnings()[0]; w.Summary() != "Drain Preview Unavailable" || !strings.Contains(w.Detail(), tt.want) {
				t.Errorf("warning %q: %q, want one that says %q", w.Summary(), w.Detail(), tt.want)
			}
		})
	}
}

// The plan's preview warning names every pod up to maxListedPods, then counts.
func TestPreviewDetailListsThePods(t *testing.T) {
	p := drain.Preview{Node: "node02"}
	for i := range maxListedPods + 2 {
		p.Evict = append(p.Evict, k8stypes.NamespacedName{Namespace: "shop", Name: fmt.Sprintf("web-%02d", i)})
	}
	p.Skip = []drain.PodReason{{Pod: k8stypes.NamespacedName{Namespace: "kube-system", Name: "agent"}, Reason: drain.SkipDaemonSet}}
	got := previewDetail(p)
	for _, want := range []string{
		"A drain of node node02 now would evict 22 pods, leave 1 (DaemonSet pod (1)) and wait for 0",
		"shop/web-00, shop/web-01", "shop/web-19 and 2 more",
		"Staying on the node: kube-system/agent (DaemonSet pod)", "Waited for: none",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("detail does not hold %q:\n%s", want, got)
		}
	}
}
