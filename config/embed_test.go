package config

import (
	"testing"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// Each webhook has match conditions of its own: the NodeMaintenance's CEL
// reads object.spec.nodeName, which a rollout does not have.
func TestEveryWebhookHasItsOwnMatchConditions(t *testing.T) {
	vwc, err := ValidatingWebhookConfiguration("nmo", admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9443/")})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]admissionregistrationv1.ValidatingWebhook{}
	for _, wh := range vwc.Webhooks {
		byName[wh.Name] = wh
	}
	nm, rollout := byName[NodeMaintenanceWebhookName], byName[RolloutWebhookName]
	if len(vwc.Webhooks) != 2 || len(nm.MatchConditions) != 1 || len(rollout.MatchConditions) != 1 {
		t.Fatalf("want the two webhooks %s and %s with one match condition each, got %+v", NodeMaintenanceWebhookName, RolloutWebhookName, vwc.Webhooks)
	}
	if got, want := *rollout.ClientConfig.URL, "https://127.0.0.1:9443/validate-nodemaintenance-io-v1alpha1-nodemaintenancerollout"; got != want {
		t.Errorf("rollout webhook URL %s, want %s", got, want)
	}
	// The NodeMaintenance's condition as it was before rollouts: installed
	// operators compare it.
	const nmCondition = `request.operation == "CREATE" || object.spec.nodeName != oldObject.spec.nodeName || ` +
		`has(object.spec.drain) != has(oldObject.spec.drain) || (has(object.spec.drain) && object.spec.drain != oldObject.spec.drain)`
	if got := nm.MatchConditions[0]; got.Name != "create-or-immutable-field-change" || got.Expression != nmCondition {
		t.Errorf("the NodeMaintenance match condition changed: %+v", got)
	}
}

// The match conditions send creates and the changes a webhook checks, and
// let an update of the metadata alone (the operator removing its finalizer
// while the webhook is down) through without the webhook. The expressions
// are evaluated with cel-go, object and oldObject untyped as the API server
// gives them to a webhook's match conditions.
func TestMatchConditionsLetMetadataOnlyUpdatesThrough(t *testing.T) {
	maintenance := func(node string, mutate func(*nmv1beta1.NodeMaintenance)) *nmv1beta1.NodeMaintenance {
		nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "m", Finalizers: []string{nmv1beta1.NodeMaintenanceFinalizer}},
			Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node, Reason: "r", Drain: &nmv1beta1.DrainPolicy{Timeout: &metav1.Duration{Duration: 60e9}}}}
		mutate(nm)
		return nm
	}
	same := func(*nmv1beta1.NodeMaintenance) {}
	rollout := func(mutate func(*nmv1alpha1.NodeMaintenanceRollout)) *nmv1alpha1.NodeMaintenanceRollout {
		r := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "r", Finalizers: []string{nmv1alpha1.RolloutFinalizer}},
			Spec: nmv1alpha1.NodeMaintenanceRolloutSpec{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}},
				MaxUnavailable: ptr.To(intstr.FromInt32(2))}}
		mutate(r)
		return r
	}
	unchanged := func(*nmv1alpha1.NodeMaintenanceRollout) {}
	for _, tt := range []struct {
		name           string
		webhook        string
		op             string
		object, oldObj runtime.Object
		want           bool
	}{
		{"nm create", NodeMaintenanceWebhookName, "CREATE", maintenance("node01", same), nil, true},
		{"nm finalizer removed", NodeMaintenanceWebhookName, "UPDATE",
			maintenance("node01", func(nm *nmv1beta1.NodeMaintenance) { nm.Finalizers = nil }), maintenance("node01", same), false},
		{"nm reason changed", NodeMaintenanceWebhookName, "UPDATE",
			maintenance("node01", func(nm *nmv1beta1.NodeMaintenance) { nm.Spec.Reason = "other" }), maintenance("node01", same), false},
		{"nm node changed", NodeMaintenanceWebhookName, "UPDATE", maintenance("node02", same), maintenance("node01", same), true},
		{"nm drain changed", NodeMaintenanceWebhookName, "UPDATE",
			maintenance("node01", func(nm *nmv1beta1.NodeMaintenance) { nm.Spec.Drain = nil }), maintenance("node01", same), true},
		{"rollout create", RolloutWebhookName, "CREATE", rollout(unchanged), nil, true},
		{"rollout finalizer removed", RolloutWebhookName, "UPDATE",
			rollout(func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Finalizers = nil }), rollout(unchanged), false},
		{"rollout labelled", RolloutWebhookName, "UPDATE",
			rollout(func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Labels = map[string]string{"team": "a"} }), rollout(unchanged), false},
		{"rollout paused", RolloutWebhookName, "UPDATE",
			rollout(func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Spec.Paused = true }), rollout(unchanged), true},
		{"rollout maxUnavailable changed", RolloutWebhookName, "UPDATE",
			rollout(func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(0)) }), rollout(unchanged), true},
		{"rollout selector changed", RolloutWebhookName, "UPDATE",
			rollout(func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Spec.NodeSelector.MatchLabels["pool"] = "b" }), rollout(unchanged), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := evalMatchCondition(t, webhookMatchConditions[tt.webhook][0].Expression, tt.op, tt.object, tt.oldObj); got != tt.want {
				t.Errorf("the %s match condition says %v, want %v", tt.webhook, got, tt.want)
			}
		})
	}
}

func evalMatchCondition(t *testing.T, expr, op string, object, oldObject runtime.Object) bool {
	t.Helper()
	env, err := cel.NewEnv(cel.Variable("request", cel.DynType), cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("compile %s: %v", expr, iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := prg.Eval(map[string]any{"request": map[string]any{"operation": op}, "object": toMap(t, object), "oldObject": toMap(t, oldObject)})
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return out.Value().(bool)
}

// toMap is obj as the API server gives it to CEL: its JSON, untyped; nil
// (no old object on a create) is null.
func toMap(t *testing.T, obj runtime.Object) any {
	if obj == nil {
		return nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
