package provider

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// ApplyDefaultOperator does what creating `resource "nodemaintenance_operator"
// "x" {}` does, without a CLI: the plan (the schema's defaults, through the
// plugin protocol) and the resource's own apply, which server-side applies
// every object as the provider's field manager and waits for the CRDs and
// the Deployment. For the tests of package provider_test.
func ApplyDefaultOperator(t *testing.T, cfg *rest.Config, timeout time.Duration) {
	t.Helper()
	m := plannedDefaultOperatorModel(t)
	c, err := newClients(cfg, "test", cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	if _, diags := (&OperatorResource{clients: c}).apply(context.Background(), &m, timeout); diags.HasError() {
		t.Fatalf("apply the default nodemaintenance_operator: %v", diags)
	}
}

// FieldManager is the field manager of everything the provider applies.
const FieldManager = fieldManager
