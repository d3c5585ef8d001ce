package provider

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// fullDrainPolicy sets every field of spec.drain; a new field must be set
// here too, or TestDrainFieldsCoverDrainPolicy fails.
func fullDrainPolicy(t *testing.T) *nmv1beta1.DrainPolicy {
	t.Helper()
	sel, err := metav1.ParseToLabelSelector("env notin (prod),tier=batch")
	if err != nil {
		t.Fatal(err)
	}
	return &nmv1beta1.DrainPolicy{
		Timeout:                  &metav1.Duration{Duration: 90 * time.Minute},
		OnTimeout:                nmv1beta1.DrainTimeoutRestore,
		PodSelector:              sel,
		GracePeriodSeconds:       ptr.To[int64](30),
		SkipWaitForDeleteTimeout: &metav1.Duration{Duration: 5 * time.Minute},
		AllowControlPlaneNode:    true,
		AllowLastSchedulableNode: true,
		DeleteEmptyDirData:       ptr.To(false),
	}
}

// specName is a DrainPolicy field's name in spec.drain (its JSON name).
func specName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// drainObject is a drain block with these values.
func drainObject(t *testing.T, values map[string]attr.Value) types.Object {
	t.Helper()
	obj, diags := types.ObjectValue(drainAttrTypes, values)
	if diags.HasError() {
		t.Fatal(diags)
	}
	return obj
}

// Every field of DrainPolicy has exactly one row, and each row writes the
// field its spec name names: a new API field without a provider row fails.
func TestDrainFieldsCoverDrainPolicy(t *testing.T) {
	full := fullDrainPolicy(t)
	rows := map[string]drainField{}
	for _, f := range drainFields {
		if _, dup := rows[f.spec]; dup {
			t.Errorf("two rows for spec.drain.%s", f.spec)
		}
		rows[f.spec] = f
	}
	policyType := reflect.TypeOf(nmv1beta1.DrainPolicy{})
	for i := range policyType.NumField() {
		field := policyType.Field(i)
		f, ok := rows[specName(field)]
		if !ok {
			t.Errorf("DrainPolicy.%s (spec.drain.%s) has no row in drainFields", field.Name, specName(field))
			continue
		}
		delete(rows, f.spec)
		if reflect.ValueOf(full).Elem().Field(i).IsZero() {
			t.Errorf("fullDrainPolicy does not set %s", field.Name)
			continue
		}
		var one nmv1beta1.DrainPolicy
		if diags := f.toSpec(f.fromSpec(full), &one, path.Root("drain").AtName(f.name)); diags.HasError() {
			t.Fatalf("%s: %v", f.name, diags)
		}
		for j := range policyType.NumField() {
			if set := !reflect.ValueOf(one).Field(j).IsZero(); set != (j == i) {
				t.Errorf("row %s (spec.drain.%s): %s set = %v", f.name, f.spec, policyType.Field(j).Name, set)
			}
		}
	}
	for spec := range rows {
		t.Errorf("row spec.drain.%s names no field of DrainPolicy", spec)
	}
}

// spec.drain goes to the block and back unchanged, every field set; the
// block holds what the state shows (durations as Duration.String).
func TestDrainBlockRoundTrip(t *testing.T) {
	ctx := context.Background()
	full := fullDrainPolicy(t)
	block, diags := drainBlock(ctx, full, types.ObjectNull(drainAttrTypes))
	if diags.HasError() {
		t.Fatal(diags)
	}
	want := map[string]attr.Value{
		"timeout": types.StringValue("1h30m0s"), "on_timeout": types.StringValue("Restore"),
		"pod_selector": types.StringValue("env notin (prod),tier=batch"), "grace_period_seconds": types.Int64Value(30),
		"skip_wait_for_delete_timeout": types.StringValue("5m0s"),
		"allow_control_plane_node":     types.BoolValue(true), "allow_last_schedulable_node": types.BoolValue(true),
		"delete_empty_dir_data": types.BoolValue(false),
	}
	if !block.Equal(drainObject(t, want)) {
		t.Errorf("drainBlock = %v\nwant %v", block, want)
	}
	got, diags := drainPolicy(ctx, block)
	if diags.HasError() {
		t.Fatal(diags)
	}
	if !reflect.DeepEqual(got, full) {
		t.Errorf("drainPolicy(drainBlock(p)) = %+v\nwant %+v", got, full)
	}

	// An empty policy is a block of nulls: false is not written.
	empty, diags := drainBlock(ctx, &nmv1beta1.DrainPolicy{}, types.ObjectNull(drainAttrTypes))
	if diags.HasError() {
		t.Fatal(diags)
	}
	for name, v := range empty.Attributes() {
		if !v.IsNull() {
			t.Errorf("empty policy: %s = %v, want null", name, v)
		}
	}

	// A prior block that says the same in other words is kept as written.
	want["timeout"] = types.StringValue("90m")
	prior := drainObject(t, want)
	if kept, _ := drainBlock(ctx, full, prior); !kept.Equal(prior) {
		t.Errorf("drainBlock with prior 90m = %v, want the prior", kept)
	}
}

// Bad values are attribute errors in the block's names.
func TestDrainPolicyDiagnostics(t *testing.T) {
	for _, tt := range []struct {
		name, value, want string
	}{
		{"timeout", "soon", `Invalid Duration: "soon" is not a Go duration (e.g. 30m): time: invalid duration "soon"`},
		{"skip_wait_for_delete_timeout", "5", `Invalid Duration: "5" is not a Go duration (e.g. 30m): time: missing unit in duration "5"`},
		{"pod_selector", "tier in (", `Invalid Label Selector: "tier in (" is not a label selector as kubectl -l takes it (e.g. tier=batch,env!=prod): `},
	} {
		t.Run(tt.name, func(t *testing.T) {
			values := map[string]attr.Value{}
			for _, f := range drainFields {
				values[f.name] = f.fromSpec(&nmv1beta1.DrainPolicy{})
			}
			values[tt.name] = types.StringValue(tt.value)
			_, diags := drainPolicy(context.Background(), drainObject(t, values))
			if len(diags) != 1 {
				t.Fatalf("diagnostics %v, want one", diags)
			}
			d, ok := diags[0].(diag.DiagnosticWithPath)
			if got := d.Summary() + ": " + d.Detail(); !ok || !d.Path().Equal(path.Root("drain").AtName(tt.name)) || !strings.HasPrefix(got, tt.want) {
				t.Errorf("got %q at %v, want %q at drain.%s", got, d.Path(), tt.want, tt.name)
			}
		})
	}
}

// Every spec.drain.<field> in an error becomes drain.<name>.
func TestTerraformNamesRenamesEveryDrainField(t *testing.T) {
	for _, f := range drainFields {
		msg := "spec.drain." + f.spec + " 0s must be positive; see spec.drain." + f.spec + "."
		want := "drain." + f.name + " 0s must be positive; see drain." + f.name + "."
		if got := terraformNames(msg); got != want {
			t.Errorf("terraformNames(%q) = %q, want %q", msg, got, want)
		}
	}
	const msg = "spec.drain.onTimeout Fail needs spec.drain.timeout: say how long to try before it applies"
	if got, want := terraformNames(msg), "drain.on_timeout Fail needs drain.timeout: say how long to try before it applies"; got != want {
		t.Errorf("terraformNames(%q) = %q, want %q", msg, got, want)
	}
}

// The pod selector is taken as kubectl -l takes it: `!=` included, as the
// same requirement as notin.
func TestParseSelectorTakesWhatKubectlTakes(t *testing.T) {
	for in, want := range map[string]string{
		"tier=batch":               "tier=batch",
		"tier!=system":             "tier notin (system)",
		"tier=batch,env!=prod":     "env notin (prod),tier=batch",
		"env notin (prod),!canary": "!canary,env notin (prod)",
		"":                         "",
	} {
		sel, err := parseSelector(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got := metav1.FormatLabelSelector(sel); got != want && !(want == "" && got == "<none>") {
			t.Errorf("%q parsed as %q, want %q", in, got, want)
		}
		// The same pods as kubectl's own parser selects.
		kubectl, _ := labels.Parse(in)
		ours, _ := metav1.LabelSelectorAsSelector(sel)
		for _, pod := range []labels.Set{{}, {"tier": "batch"}, {"tier": "system"}, {"env": "prod", "tier": "batch"}, {"canary": "x"}} {
			if kubectl.Matches(pod) != ours.Matches(pod) {
				t.Errorf("%q: pod labels %v: kubectl selects %v, the parsed selector %v", in, pod, kubectl.Matches(pod), ours.Matches(pod))
			}
		}
	}
	if _, err := parseSelector("tier>2"); err == nil {
		t.Error("a selector kubectl's -l refuses for pods was taken")
	}
}
