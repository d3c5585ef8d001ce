package provider

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The API server's answer when it cannot call a webhook under failurePolicy
// Fail is an internal error with the webhook's name and the dial error (the
// same text operator/e2e's TestWebhookUnreachable gets from a real cluster).
func TestAPIErrorExplainsAnUnreachableWebhook(t *testing.T) {
	err := apierrors.NewInternalError(errors.New(`failed calling webhook "vnodemaintenance.medik8s.io": failed to call webhook: ` +
		`Post "https://127.0.0.1:40000/validate-nodemaintenance-medik8s-io-v1beta1-nodemaintenance?timeout=15s": dial tcp 127.0.0.1:40000: connect: connection refused`))
	var diags diag.Diagnostics
	(&clients{cluster: "https://127.0.0.1:6443"}).apiError(&diags, "Cannot Create NodeMaintenance", `Creating NodeMaintenance "maintain-node02" for node "node02"`, err)
	if len(diags) != 1 || diags[0].Summary() != "NodeMaintenance Webhook Unreachable" {
		t.Fatalf("diagnostics %v, want one NodeMaintenance Webhook Unreachable", diags)
	}
	for _, want := range []string{`"maintain-node02"`, "vnodemaintenance.medik8s.io", "connection refused", "nothing was changed", "operator is running", "Deleting a NodeMaintenance does not need the webhook"} {
		if !strings.Contains(diags[0].Detail(), want) {
			t.Errorf("detail lacks %q:\n%s", want, diags[0].Detail())
		}
	}

	// A refusal by the webhook itself stays the webhook's own message.
	denied := apierrors.NewForbidden(schema.GroupResource{Group: "nodemaintenance.medik8s.io", Resource: "nodemaintenances"}, "maintain-node02",
		errors.New(`admission webhook "vnodemaintenance.medik8s.io" denied the request: node "node02" does not exist`))
	diags = nil
	(&clients{}).apiError(&diags, "Cannot Create NodeMaintenance", "Creating", denied)
	if len(diags) != 1 || diags[0].Summary() != "Cannot Create NodeMaintenance" || !strings.Contains(diags[0].Detail(), "does not exist") {
		t.Errorf("a webhook refusal became %v", diags)
	}
}
