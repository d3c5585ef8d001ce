package webhook

import (
	"context"
	"errors"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Results of an admission, the label result of admissions.
const (
	ResultAdmitted = "admitted"
	ResultRefused  = "refused"
	// ResultError: the webhook could not decide (an API call failed or
	// timed out), and the API server refused the request for it.
	ResultError = "error"
)

// admissions counts the webhooks' decisions. controller-runtime's
// controller_runtime_webhook_requests_total counts HTTP status codes, and an
// admission webhook answers 200 whether it admits, refuses or fails, so it
// cannot tell a webhook that is failing from one that says no.
var admissions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "nodemaintenance_webhook_admissions_total",
	Help: "Admission decisions of the operator's webhooks, by kind, operation and result: admitted, refused (a rule said no) or error (the webhook could not decide: an API call failed or timed out).",
}, []string{"kind", "operation", "result"})

func init() {
	metrics.Registry.MustRegister(admissions)
}

// resultOf classifies a validator's answer: an error that is a server-side
// API failure (5xx, 429) or a context that ended is the webhook failing,
// any other error a refusal.
func resultOf(err error) string {
	if err == nil {
		return ResultAdmitted
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return ResultError
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		if code >= http.StatusInternalServerError || code == http.StatusTooManyRequests {
			return ResultError
		}
	}
	return ResultRefused
}

// counted wraps a validator to count its decisions by kind.
type counted[T runtime.Object] struct {
	kind string
	next admission.Validator[T]
}

func (c counted[T]) record(op string, w admission.Warnings, err error) (admission.Warnings, error) {
	admissions.WithLabelValues(c.kind, op, resultOf(err)).Inc()
	return w, err
}

func (c counted[T]) ValidateCreate(ctx context.Context, obj T) (admission.Warnings, error) {
	w, err := c.next.ValidateCreate(ctx, obj)
	return c.record("CREATE", w, err)
}

func (c counted[T]) ValidateUpdate(ctx context.Context, oldObj, newObj T) (admission.Warnings, error) {
	w, err := c.next.ValidateUpdate(ctx, oldObj, newObj)
	return c.record("UPDATE", w, err)
}

func (c counted[T]) ValidateDelete(ctx context.Context, obj T) (admission.Warnings, error) {
	w, err := c.next.ValidateDelete(ctx, obj)
	return c.record("DELETE", w, err)
}
