package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
)

// The preamble of every CRUD method and data source Read: read the request's
// plan, state or config into the model, check that the provider is
// configured, and for the methods that wait, read their timeout.

// modelRead reads a request's plan, state or config (tfsdk.Plan, State and
// Config all have this Get) into a model.
type modelRead struct {
	from interface {
		Get(context.Context, any) diag.Diagnostics
	}
	into any
}

func read(from interface {
	Get(context.Context, any) diag.Diagnostics
}, into any) modelRead {
	return modelRead{from: from, into: into}
}

// waitTimeout is the timeout of one operation in a timeouts block
// (timeouts.Value.Create, Update or Delete) and its default.
type waitTimeout struct {
	of  func(timeouts.Value, context.Context, time.Duration) (time.Duration, diag.Diagnostics)
	def time.Duration
}

func createTimeout(def time.Duration) *waitTimeout { return &waitTimeout{timeouts.Value.Create, def} }
func updateTimeout(def time.Duration) *waitTimeout { return &waitTimeout{timeouts.Value.Update, def} }
func deleteTimeout(def time.Duration) *waitTimeout { return &waitTimeout{timeouts.Value.Delete, def} }

// withTimeouts is a resource model with a timeouts block.
type withTimeouts interface {
	timeoutsBlock() timeouts.Value
}

func (m *nodeMaintenanceResourceModel) timeoutsBlock() timeouts.Value { return m.Timeouts }
func (m *operatorResourceModel) timeoutsBlock() timeouts.Value        { return m.Timeouts }

// begin runs the preamble: it reads every model, checks that the provider is
// configured and, when wait is set, reads the timeout from the first model's
// timeouts block. It returns false when the method must stop; diags say why.
func begin(ctx context.Context, c *clients, diags *diag.Diagnostics, wait *waitTimeout, reads ...modelRead) (time.Duration, bool) {
	for _, r := range reads {
		diags.Append(r.from.Get(ctx, r.into)...)
	}
	if diags.HasError() {
		return 0, false
	}
	if c == nil {
		notConfigured(diags)
		return 0, false
	}
	if wait == nil {
		return 0, true
	}
	m, ok := reads[0].into.(withTimeouts)
	if !ok {
		diags.AddError("Provider Bug", fmt.Sprintf("%T has no timeouts block. This is a bug in the provider; please report it.", reads[0].into))
		return 0, false
	}
	return wait.read(ctx, diags, m)
}

// read returns the timeout of m, false (diags say why) when it is invalid.
func (w *waitTimeout) read(ctx context.Context, diags *diag.Diagnostics, m withTimeouts) (time.Duration, bool) {
	timeout, d := w.of(m.timeoutsBlock(), ctx, w.def)
	diags.Append(d...)
	return timeout, !diags.HasError()
}
