package webhook

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

func TestResultOfTellsAFailingWebhookFromARefusal(t *testing.T) {
	nodes := schema.GroupResource{Resource: "nodes"}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"admitted", nil, ResultAdmitted},
		{"a rule", errors.New(`node "x" does not exist`), ResultRefused},
		{"forbidden", fmt.Errorf("step: %w", apierrors.NewForbidden(nodes, "x", errors.New("no"))), ResultRefused},
		{"invalid", apierrors.NewBadRequest("spec.drain"), ResultRefused},
		{"API server down", fmt.Errorf("cannot check that node %q exists: %w", "x", apierrors.NewServiceUnavailable("etcd")), ResultError},
		{"internal", fmt.Errorf("list: %w", apierrors.NewInternalError(errors.New("boom"))), ResultError},
		{"throttled", fmt.Errorf("list: %w", apierrors.NewTooManyRequests("slow down", 1)), ResultError},
		{"timeout", fmt.Errorf("ledger: %w", context.DeadlineExceeded), ResultError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resultOf(tc.err); got != tc.want {
				t.Errorf("resultOf(%v) = %s, want %s", tc.err, got, tc.want)
			}
		})
	}
}

// answering is a validator that answers every call with err.
type answering struct{ err error }

func (a answering) ValidateCreate(context.Context, *nmv1beta1.NodeMaintenance) (admission.Warnings, error) {
	return admission.Warnings{"w"}, a.err
}
func (a answering) ValidateUpdate(context.Context, *nmv1beta1.NodeMaintenance, *nmv1beta1.NodeMaintenance) (admission.Warnings, error) {
	return nil, a.err
}
func (a answering) ValidateDelete(context.Context, *nmv1beta1.NodeMaintenance) (admission.Warnings, error) {
	return nil, a.err
}

func TestCountedCountsEachDecisionAndPassesItOn(t *testing.T) {
	const kind = "CountedTest"
	refusal := errors.New("no")
	ok := counted[*nmv1beta1.NodeMaintenance]{kind: kind, next: answering{}}
	no := counted[*nmv1beta1.NodeMaintenance]{kind: kind, next: answering{err: refusal}}
	ctx := context.Background()
	if w, err := ok.ValidateCreate(ctx, &nmv1beta1.NodeMaintenance{}); err != nil || len(w) != 1 {
		t.Fatalf("ValidateCreate passed on (%v, %v), want the warnings and no error", w, err)
	}
	if _, err := no.ValidateUpdate(ctx, &nmv1beta1.NodeMaintenance{}, &nmv1beta1.NodeMaintenance{}); !errors.Is(err, refusal) {
		t.Fatalf("ValidateUpdate passed on %v, want the refusal", err)
	}
	_, _ = no.ValidateDelete(ctx, &nmv1beta1.NodeMaintenance{})
	for _, c := range []struct {
		op, result string
	}{{"CREATE", ResultAdmitted}, {"UPDATE", ResultRefused}, {"DELETE", ResultRefused}} {
		if got := testutil.ToFloat64(admissions.WithLabelValues(kind, c.op, c.result)); got != 1 {
			t.Errorf("%s %s counted %v times, want 1", c.op, c.result, got)
		}
	}
}
