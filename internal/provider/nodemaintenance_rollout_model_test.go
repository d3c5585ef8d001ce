package provider

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

const busyboxTemplate = `spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: patch
          image: busybox
          command: ["sh", "-c", "echo patched"]
`

// fullRolloutSpec sets every attribute of the resource's spec.
func fullRolloutSpec(t *testing.T) rolloutSpecModel {
	t.Helper()
	drain, diags := types.ObjectValue(drainAttrTypes, map[string]attr.Value{
		"timeout": types.StringValue("30m"), "on_timeout": types.StringValue("Fail"), "pod_selector": types.StringValue("app!=web"),
		"grace_period_seconds": types.Int64Value(5), "skip_wait_for_delete_timeout": types.StringNull(),
		"delete_empty_dir_data": types.BoolValue(false), "allow_control_plane_node": types.BoolNull(), "allow_last_schedulable_node": types.BoolNull(),
	})
	mustOK(t, diags)
	step, diags := types.ObjectValue(stepAttrTypes, map[string]attr.Value{
		"namespace": types.StringValue("ops"), "job_template": types.StringValue(busyboxTemplate), "timeout": types.StringValue("15m"),
	})
	mustOK(t, diags)
	return rolloutSpecModel{
		NodeSelector: types.StringValue("pool=blue,zone!=a"), NodeNames: types.ListNull(types.StringType),
		MaxUnavailable: types.StringValue("30%"), Reason: types.StringValue("kernel 6.12"), Drain: drain, Step: step,
		HoldFor: types.StringValue("90s"), SoakFor: types.StringValue("5m"), OnFailure: types.StringValue("Continue"),
		MaxFailures: types.Int64Value(2), Paused: types.BoolValue(true), rolloutSafetyModel: fullSafety(t),
	}
}

// fullSafety sets every safety attribute.
func fullSafety(t *testing.T) rolloutSafetyModel {
	t.Helper()
	var diags diag.Diagnostics
	prom := objectValue(prometheusAttrTypes, map[string]attr.Value{"url": types.StringValue("http://prometheus.monitoring:9090"),
		"query": types.StringValue(`ALERTS{alertstate="firing"}`)}, &diags)
	days, d := types.ListValueFrom(context.Background(), types.StringType, []string{"Sat", "sunday"})
	diags.Append(d...)
	events, d := types.ListValueFrom(context.Background(), types.StringType, []string{"Blocked", "Halted"})
	diags.Append(d...)
	ref := objectValue(secretRefAttrTypes, map[string]attr.Value{"name": types.StringValue("hook"), "key": types.StringValue("token")}, &diags)
	notify, d := types.ListValue(notifyType, []attr.Value{
		objectValue(notifyAttrTypes, map[string]attr.Value{"url": types.StringValue("https://hooks.example/nm"), "events": events, "secret_ref": ref}, &diags),
		objectValue(notifyAttrTypes, map[string]attr.Value{"url": types.StringValue("http://pager:8080"), "events": types.ListNull(types.StringType),
			"secret_ref": types.ObjectNull(secretRefAttrTypes)}, &diags),
	})
	diags.Append(d...)
	m := rolloutSafetyModel{
		RecoveryGate: types.StringValue("Workloads"), RecoveryTimeout: types.StringValue("20m"),
		Gates: objectValue(gatesAttrTypes, map[string]attr.Value{"prometheus": prom}, &diags),
		Window: objectValue(windowAttrTypes, map[string]attr.Value{"days": days, "start": types.StringValue("22:00"),
			"end": types.StringValue("04:00"), "time_zone": types.StringValue("Europe/Berlin")}, &diags),
		Notify: notify,
	}
	mustOK(t, diags)
	return m
}

// specModelDiff names the attributes whose values differ.
func specModelDiff(a, b rolloutSpecModel) string {
	return strings.Join(fieldDiff(reflect.ValueOf(a), reflect.ValueOf(b)), "; ")
}

// fieldDiff compares the attr.Value fields of two model structs, and of the
// structs they embed.
func fieldDiff(va, vb reflect.Value) []string {
	var diff []string
	for i := range va.NumField() {
		if f := va.Type().Field(i); f.Anonymous && f.Type.Kind() == reflect.Struct {
			diff = append(diff, fieldDiff(va.Field(i), vb.Field(i))...)
			continue
		}
		x, y := va.Field(i).Interface().(attr.Value), vb.Field(i).Interface().(attr.Value)
		if !x.Equal(y) {
			diff = append(diff, fmt.Sprintf("%s: %s, want %s", va.Type().Field(i).Name, x, y))
		}
	}
	return diff
}

func mustOK(t *testing.T, diags diag.Diagnostics) {
	t.Helper()
	if diags.HasError() {
		t.Fatalf("diagnostics: %v", diags)
	}
}

// Every attribute survives the trip to the CR and back, written as the user
// wrote it (90s, not 1m30s; the YAML, not JSON; != not notin).
func TestRolloutSpecRoundTripKeepsTheConfiguration(t *testing.T) {
	ctx := context.Background()
	m := fullRolloutSpec(t)
	spec, diags := m.spec(ctx)
	mustOK(t, diags)
	if spec.MaxUnavailable.String() != "30%" || spec.HoldFor.Duration != 90*time.Second || spec.Step.Timeout.Duration != 15*time.Minute ||
		spec.Step.JobTemplate.Spec.Template.Spec.Containers[0].Image != "busybox" || *spec.MaxFailures != 2 || !spec.Paused ||
		spec.Drain.Timeout.Duration != 30*time.Minute || spec.OnFailure != nmv1alpha1.RolloutContinue {
		t.Fatalf("spec: %+v", spec)
	}
	back := m
	mustOK(t, back.readSpec(ctx, spec))
	if diff := specModelDiff(back, m); diff != "" {
		t.Errorf("read back differs in %s", diff)
	}
}

// An import has no prior values: everything is written in the API's own
// words, and it converts to the same spec.
func TestRolloutSpecImportReadsCanonicalValues(t *testing.T) {
	ctx := context.Background()
	spec, diags := fullRolloutSpec(t).spec(ctx)
	mustOK(t, diags)
	imported := rolloutSpecModel{NodeSelector: types.StringNull(), NodeNames: types.ListNull(types.StringType), MaxUnavailable: types.StringNull(),
		Reason: types.StringNull(), Drain: types.ObjectNull(drainAttrTypes), Step: types.ObjectNull(stepAttrTypes),
		HoldFor: types.StringNull(), SoakFor: types.StringNull(), OnFailure: types.StringNull(), MaxFailures: types.Int64Null(), Paused: types.BoolNull()}
	mustOK(t, imported.readSpec(ctx, spec))
	if got := imported.NodeSelector.ValueString(); got != "pool=blue,zone notin (a)" {
		t.Errorf("node_selector %q", got)
	}
	if got := imported.HoldFor.ValueString(); got != "1m30s" {
		t.Errorf("hold_for %q", got)
	}
	again, diags := imported.spec(ctx)
	mustOK(t, diags)
	if !equality.Semantic.DeepEqual(again, spec) {
		t.Errorf("imported spec:\n%+v\nwant\n%+v", again, spec)
	}
}

// Without max_unavailable in the CR the default shows; node_names keep
// their order.
func TestRolloutSpecNodeNamesAndDefaultMaxUnavailable(t *testing.T) {
	ctx := context.Background()
	var m rolloutSpecModel
	m.NodeNames, m.Step, m.Drain = types.ListNull(types.StringType), types.ObjectNull(stepAttrTypes), types.ObjectNull(drainAttrTypes)
	mustOK(t, m.readSpec(ctx, nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: []string{"node03", "node01"}}))
	if m.MaxUnavailable.ValueString() != defaultRolloutMaxUnavailable || m.NodeSelector.IsNull() == false {
		t.Errorf("max_unavailable %s, node_selector %s", m.MaxUnavailable, m.NodeSelector)
	}
	var names []string
	mustOK(t, m.NodeNames.ElementsAs(ctx, &names, false))
	if strings.Join(names, ",") != "node03,node01" {
		t.Errorf("node_names %v", names)
	}
}

func TestParseJobTemplateSaysWhatIsWrong(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"not YAML", "spec: [", "is not a batch/v1 JobTemplateSpec"},
		{"misspelt field", "spec:\n  template:\n    spec:\n      contaners: []\n", `unknown field "contaners"`},
		{"a whole Job", "apiVersion: batch/v1\nkind: Job\n" + busyboxTemplate, `unknown field "apiVersion"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseJobTemplate(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one that says %q", err, tt.want)
			}
		})
	}
	if _, err := parseJobTemplate(`{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"b"}]}}}}`); err != nil {
		t.Errorf("JSON: %v", err)
	}
}

func TestRolloutValidatorsRefuseBadInput(t *testing.T) {
	ctx := context.Background()
	check := func(v validator.String, in string, ok bool) {
		t.Helper()
		resp := &validator.StringResponse{}
		v.ValidateString(ctx, validator.StringRequest{Path: path.Root("x"), ConfigValue: types.StringValue(in)}, resp)
		if resp.Diagnostics.HasError() == ok {
			t.Errorf("%T(%q): %v, want ok=%v", v, in, resp.Diagnostics, ok)
		}
	}
	for in, ok := range map[string]bool{"1": true, "3": true, "30%": true, "-1": false, "x": false} {
		check(rolloutMaxUnavailable{}, in, ok)
	}
	for in, ok := range map[string]bool{"pool=blue": true, "pool in (a,b),zone!=c": true, "": false, "pool in (a": false} {
		check(labelSelector{}, in, ok)
	}
	for in, ok := range map[string]bool{"0s": true, "5m": true, "-1s": false, "x": false} {
		check(positiveDuration{orZero: true}, in, ok)
	}
	check(positiveDuration{}, "0s", false)
	check(jobTemplate{}, busyboxTemplate, true)
	check(jobTemplate{}, "spec: [", false)
}

// The API's own rules (the webhook's), in the resource's names, on the
// attribute they are about; the ones an attribute checks itself are left
// to it.
func TestRolloutProblemsAreTheWebhooksInTerraformNames(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		change func(*rolloutSpecModel)
		at     string
		want   string
	}{
		{"zero", func(m *rolloutSpecModel) { m.MaxUnavailable = types.StringValue("0") }, "max_unavailable", "max_unavailable 0 must be at least 1"},
		{"over 100%", func(m *rolloutSpecModel) { m.MaxUnavailable = types.StringValue("150%") }, "max_unavailable", "between 1% and 100%"},
		{"max_failures with Halt", func(m *rolloutSpecModel) { m.OnFailure = types.StringValue("Halt") }, "max_failures", "max_failures 2 has no effect with onFailure Halt"},
		{"no container", func(m *rolloutSpecModel) {
			m.Step, _ = types.ObjectValue(stepAttrTypes, map[string]attr.Value{"namespace": types.StringValue("ops"),
				"job_template": types.StringValue("spec:\n  template:\n    spec:\n      restartPolicy: Never\n"), "timeout": types.StringNull()})
		}, "step.job_template", "step.job_template.spec.template.spec.containers is empty"},
		{"negative hold_for: its own validator says so", func(m *rolloutSpecModel) { m.HoldFor = types.StringValue("-1s") }, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := fullRolloutSpec(t)
			tt.change(&m)
			spec, diags := m.spec(ctx)
			mustOK(t, diags)
			got := rolloutProblems(spec, false)
			if tt.want == "" {
				if got.HasError() {
					t.Errorf("problems %v, want none", got)
				}
				return
			}
			if got.ErrorsCount() != 1 {
				t.Fatalf("problems %v, want one", got)
			}
			d := got.Errors()[0].(diag.DiagnosticWithPath)
			if !d.Path().Equal(attributePath(tt.at)) || !strings.Contains(d.Detail(), tt.want) {
				t.Errorf("problem at %s: %s\nwant at %s: %s", d.Path(), d.Detail(), tt.at, tt.want)
			}
		})
	}
}

func rolloutWith(phase nmv1alpha1.RolloutPhase, rows ...nmv1alpha1.RolloutNode) *rollout {
	r := &rollout{ObjectMeta: metav1.ObjectMeta{Name: "pool-blue", Generation: 2}}
	r.Status = nmv1alpha1.NodeMaintenanceRolloutStatus{ObservedGeneration: 2, Phase: phase, Nodes: rows, Total: int32(len(rows))}
	return r
}

func TestRolloutSettled(t *testing.T) {
	stale := rolloutWith(nmv1alpha1.RolloutSucceeded)
	stale.Status.ObservedGeneration = 1
	for _, tt := range []struct {
		r      *rollout
		goal   rolloutGoal
		settle bool
	}{
		{nil, goalEnded, true},
		{rolloutWith(""), goalEnded, false},
		{rolloutWith(""), goalAccepted, false}, // not picked up yet
		{rolloutWith(nmv1alpha1.RolloutPending), goalAccepted, false},
		{rolloutWith(nmv1alpha1.RolloutProgressing), goalEnded, false},
		{rolloutWith(nmv1alpha1.RolloutProgressing), goalAccepted, true},
		{rolloutWith(nmv1alpha1.RolloutPaused), goalEnded, false},
		{rolloutWith(nmv1alpha1.RolloutPaused), goalAccepted, false}, // the configuration resumes it
		{rolloutWith(nmv1alpha1.RolloutPaused), goalPaused, true},
		{rolloutWith(nmv1alpha1.RolloutHalted), goalEnded, true},
		{rolloutWith(nmv1alpha1.RolloutHalted), goalAccepted, true},
		{rolloutWith(nmv1alpha1.RolloutSucceeded), goalPaused, true},
		{stale, goalEnded, false}, // the operator has not seen the update yet
		{stale, goalAccepted, false},
	} {
		if got := rolloutSettled(tt.goal)(tt.r); got != tt.settle {
			t.Errorf("%+v goal %s: settled %v", tt.r, tt.goal, got)
		}
	}
}

// The goal follows paused, then wait_for_completion.
func TestRolloutGoal(t *testing.T) {
	for _, tt := range []struct {
		paused, wait types.Bool
		want         rolloutGoal
	}{
		{types.BoolValue(false), types.BoolValue(true), goalEnded},
		{types.BoolValue(false), types.BoolNull(), goalEnded},
		{types.BoolValue(false), types.BoolValue(false), goalAccepted},
		{types.BoolValue(true), types.BoolValue(false), goalPaused},
	} {
		m := rolloutResourceModel{WaitForCompletion: tt.wait}
		m.Paused = tt.paused
		if got := m.goal(); got != tt.want {
			t.Errorf("paused %s wait %s: goal %s, want %s", tt.paused, tt.wait, got, tt.want)
		}
	}
}

// The timeline says what moved: the phase once, each node when its state
// changes, not the nodes that only wait.
func TestRolloutTimelineLinesAreNews(t *testing.T) {
	tl := newRolloutTimeline("pool-blue")
	waiting := func(name string) nmv1alpha1.RolloutNode {
		return nmv1alpha1.RolloutNode{Name: name, Wave: 1, State: nmv1alpha1.NodeWaiting}
	}
	got := tl.lines(rolloutWith(nmv1alpha1.RolloutProgressing,
		nmv1alpha1.RolloutNode{Name: "a", Wave: 1, State: nmv1alpha1.NodeDraining, Maintenance: "pool-blue-a"}, waiting("b")))
	want := []string{
		"NodeMaintenanceRollout pool-blue: Progressing, 0/2 nodes done, 0 in progress, 0 failed",
		"NodeMaintenanceRollout pool-blue: wave 1, node a: Draining (NodeMaintenance pool-blue-a)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	got = tl.lines(rolloutWith(nmv1alpha1.RolloutProgressing,
		nmv1alpha1.RolloutNode{Name: "a", Wave: 1, State: nmv1alpha1.NodeStepRunning, Job: "pool-blue-a-step"}, waiting("b")))
	if len(got) != 1 || got[0] != "NodeMaintenanceRollout pool-blue: wave 1, node a: StepRunning (Job pool-blue-a-step)" {
		t.Fatalf("got %q", got)
	}
	if got := tl.lines(nil); len(got) != 1 || !strings.HasSuffix(got[0], "gone") {
		t.Fatalf("gone: %q", got)
	}
}

func TestHaltedDetailNamesTheFailedNode(t *testing.T) {
	r := rolloutWith(nmv1alpha1.RolloutHalted,
		nmv1alpha1.RolloutNode{Name: "a", Wave: 1, State: nmv1alpha1.NodeDone},
		nmv1alpha1.RolloutNode{Name: "b", Wave: 2, State: nmv1alpha1.NodeFailed, Maintenance: "pool-blue-b", Reason: "drain timed out: pod shop/db-0 blocked by budget db"})
	r.Status.Message = "node b failed"
	got := haltedDetail(r, "create")
	for _, want := range []string{`"pool-blue" halted after 0 of 2 nodes: node b failed`,
		"node b (wave 2, NodeMaintenance pool-blue-b): drain timed out: pod shop/db-0 blocked by budget db", "tainted"} {
		if !strings.Contains(got, want) {
			t.Errorf("detail does not say %q:\n%s", want, got)
		}
	}
}

func TestRolloutWavesFollowMaxUnavailable(t *testing.T) {
	nodes := []string{"a", "b", "c", "d", "e"}
	got := wavesDetail(nodes, 2, "2")
	for _, want := range []string{"5 nodes, at most 2 at a time", "wave 1: a, b\n", "wave 2: c, d\n", "wave 3: e\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("waves do not say %q:\n%s", want, got)
		}
	}
}

// An empty selection and a missing node are errors on their attribute.
func TestResolveNodesRefusesEmptySets(t *testing.T) {
	ctx := context.Background()
	node := func(name, pool string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": pool}}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node("b2", "blue"), node("b1", "blue"), node("g1", "green")).Build()
	sel := func(s string) *metav1.LabelSelector { l, _ := parseSelector(s); return l }
	for _, tt := range []struct {
		name string
		spec nmv1alpha1.NodeMaintenanceRolloutSpec
		want string // the nodes, or the error's summary
	}{
		{"selector", nmv1alpha1.NodeMaintenanceRolloutSpec{NodeSelector: sel("pool=blue")}, "b1,b2"},
		{"no match", nmv1alpha1.NodeMaintenanceRolloutSpec{NodeSelector: sel("pool=red")}, "No Node Matches the Selector"},
		{"names", nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: []string{"g1", "b1"}}, "g1,b1"},
		{"missing", nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: []string{"g1", "x9"}}, "Node Not Found"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var diags diag.Diagnostics
			nodes, err := resolveNodes(ctx, c, tt.spec, &diags)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(nodes, ",")
			if diags.HasError() {
				got = diags.Errors()[0].Summary()
			}
			if got != tt.want {
				t.Errorf("got %q (%v), want %q", got, diags, tt.want)
			}
		})
	}
}

// An update writes every field that changes in place, including the ones
// unset (removed), and keeps the node set, the drain and the step.
func TestSetInPlace(t *testing.T) {
	spec, diags := fullRolloutSpec(t).spec(context.Background())
	mustOK(t, diags)
	spec.Reason, spec.HoldFor, spec.Window = "", nil, nil
	was, diags := fullRolloutSpec(t).spec(context.Background())
	mustOK(t, diags)
	was.NodeSelector, was.Drain, was.Step.Namespace = nil, nil, "elsewhere"
	got := *was.DeepCopy()
	setInPlace(&got, spec)
	want := *spec.DeepCopy()
	want.NodeSelector, want.Drain, want.Step = was.NodeSelector, was.Drain, was.Step
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("setInPlace wrote\n%+v\nwant\n%+v", got, want)
	}
}

func TestRolloutStatusReadsEveryRow(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 5, 14, 0, 0, 0, time.UTC))
	r := rolloutWith(nmv1alpha1.RolloutSucceeded, nmv1alpha1.RolloutNode{Name: "a", Wave: 1, State: nmv1alpha1.NodeDone, StartedAt: &now})
	s, diags := rolloutStatusFrom(context.Background(), r.Status)
	mustOK(t, diags)
	if s.Phase.ValueString() != "Succeeded" || s.Total.ValueInt64() != 1 || len(s.Nodes.Elements()) != 1 {
		t.Fatalf("status %+v", s)
	}
	row := s.Nodes.Elements()[0].(types.Object).Attributes()
	if row["started_at"].(types.String).ValueString() != "2026-12-05T14:00:00Z" || row["drained_at"].(types.String).ValueString() != "" ||
		row["wave"].(types.Int64).ValueInt64() != 1 {
		t.Errorf("row %v", row)
	}
}

// A template from another resource is checked at apply, not refused as empty.
func TestRolloutProblemsWaitForAnUnknownTemplate(t *testing.T) {
	ctx := context.Background()
	m := fullRolloutSpec(t)
	step, diags := types.ObjectValue(stepAttrTypes, map[string]attr.Value{
		"namespace": types.StringValue("ops"), "job_template": types.StringUnknown(), "timeout": types.StringNull()})
	mustOK(t, diags)
	m.Step = step
	spec, diags := m.spec(ctx)
	mustOK(t, diags)
	if !unknownTemplate(ctx, m.Step) {
		t.Fatal("the template is unknown")
	}
	if got := rolloutProblems(spec, true); got.HasError() {
		t.Errorf("problems %v, want none until the template is known", got)
	}
}

// An operator without rollouts is named as the cause, not the NodeMaintenance CRD.
func TestRolloutAPIErrorNamesTheRolloutCRD(t *testing.T) {
	c := &clients{cluster: "https://127.0.0.1:6443"}
	var diags diag.Diagnostics
	err := &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: nmv1alpha1.Group, Kind: nmv1alpha1.RolloutKind}, SearchedVersions: []string{"v1alpha1"}}
	c.rolloutAPIError(&diags, "Cannot Create NodeMaintenanceRollout", `Creating NodeMaintenanceRollout "x"`, err)
	if diags.ErrorsCount() != 1 || diags.Errors()[0].Summary() != "NodeMaintenanceRollout CRD Not Installed" ||
		!strings.Contains(diags.Errors()[0].Detail(), nmv1alpha1.RolloutCRDName) {
		t.Errorf("diagnostics %v", diags)
	}
}
