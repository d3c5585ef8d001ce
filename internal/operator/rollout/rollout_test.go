package rollout

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
)

var now = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

func readyNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "a"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

func rows(states ...nmv1alpha1.RolloutNodeState) []nmv1alpha1.RolloutNode {
	out := make([]nmv1alpha1.RolloutNode, len(states))
	for i, s := range states {
		out[i] = nmv1alpha1.RolloutNode{Name: string(rune('a' + i)), State: s}
	}
	return out
}

func cordonedNode(name string) *corev1.Node {
	n := readyNode(name)
	n.Spec.Unschedulable = true
	return n
}

func notReadyNode(name string) *corev1.Node {
	n := readyNode(name)
	n.Status.Conditions[0].Status = corev1.ConditionFalse
	return n
}

func serving(rs []nmv1alpha1.RolloutNode) map[string]observed {
	obs := map[string]observed{}
	for _, r := range rs {
		obs[r.Name] = observed{node: readyNode(r.Name)}
	}
	return obs
}

func TestWavesOfANewSet(t *testing.T) {
	got := newRows([]string{"a", "b", "c", "d", "e", "f", "g"}, 3)
	want := []int32{1, 1, 1, 2, 2, 2, 3}
	for i, row := range got {
		if row.Wave != want[i] || row.State != nmv1alpha1.NodeWaiting {
			t.Errorf("row %d: wave %d state %s, want wave %d Waiting", i, row.Wave, row.State, want[i])
		}
	}
}

func TestMaxUnavailableResolvedAgainstTheSet(t *testing.T) {
	for _, tc := range []struct {
		v     *intstr.IntOrString
		total int
		want  int
	}{
		{nil, 10, 1},
		{ptr.To(intstr.FromInt32(3)), 10, 3},
		{ptr.To(intstr.FromString("30%")), 10, 3},
		{ptr.To(intstr.FromString("34%")), 6, 2},
		{ptr.To(intstr.FromString("10%")), 4, 1}, // rounded down, at least one
	} {
		ro := &nmv1alpha1.NodeMaintenanceRollout{Spec: nmv1alpha1.NodeMaintenanceRolloutSpec{MaxUnavailable: tc.v}}
		if got, err := maxUnavailable(ro, tc.total); err != nil || got != tc.want {
			t.Errorf("maxUnavailable %v of %d = %d, %v; want %d", tc.v, tc.total, got, err, tc.want)
		}
	}
}

// The slots: nodes of the set that are down for any reason count, and a
// Waiting row starts only while fewer than the limit are out of service.
func TestStartCountsEveryNodeOutOfService(t *testing.T) {
	child := func(node string) string { return "ro-" + node }
	for _, tc := range []struct {
		name    string
		rows    []nmv1alpha1.RolloutNode
		change  func(map[string]observed)
		limit   int
		blocked bool
		started []string
	}{
		{name: "fills the free slots in order", rows: rows("Waiting", "Waiting", "Waiting", "Waiting"), limit: 2, started: []string{"a", "b"}},
		{name: "soaking holds its slot", rows: rows("Soaking", "Waiting", "Waiting"), limit: 2, started: []string{"b"}},
		{name: "a cordoned node of the set takes a slot", rows: rows("Done", "Waiting", "Waiting"), limit: 1,
			change: func(o map[string]observed) { o["a"].node.Spec.Unschedulable = true }},
		{name: "a NotReady node of the set takes a slot, and is maintained in it", rows: rows("Waiting", "Waiting", "Waiting"), limit: 2,
			change:  func(o map[string]observed) { o["c"].node.Status.Conditions[0].Status = corev1.ConditionFalse },
			started: []string{"a", "c"}},
		{name: "a failed node still held takes a slot", rows: rows("Failed", "Waiting"), limit: 1,
			change: func(o map[string]observed) { o["a"] = observed{node: o["a"].node, child: &nmv1beta1.NodeMaintenance{}} }},
		{name: "someone else's maintenance takes a slot and its node waits", rows: rows("Waiting", "Waiting", "Waiting"), limit: 2,
			change:  func(o map[string]observed) { o["a"] = observed{node: o["a"].node, foreign: "theirs"} },
			started: []string{"b"}},
		{name: "a cordoned waiting node counts once, started or not", rows: rows("Waiting", "Waiting", "Waiting"), limit: 2,
			change:  func(o map[string]observed) { o["a"].node.Spec.Unschedulable = true },
			started: []string{"a", "b"}},
		{name: "a cordoned waiting node starts when the slots are taken: it is out of service already", rows: rows("Waiting", "Waiting"), limit: 1,
			change:  func(o map[string]observed) { o["a"].node.Spec.Unschedulable = true },
			started: []string{"a"}},
		{name: "a NotReady waiting node starts behind a full slot, the others wait", rows: rows("Draining", "Waiting", "Waiting"), limit: 1,
			change:  func(o map[string]observed) { o["c"].node.Status.Conditions[0].Status = corev1.ConditionFalse },
			started: []string{"c"}},
		{name: "paused or halted starts nothing", rows: rows("Waiting", "Waiting"), limit: 2, blocked: true},
		{name: "a row whose child exists is adopted even when blocked", rows: rows("Waiting", "Waiting"), limit: 1, blocked: true,
			change:  func(o map[string]observed) { o["b"] = observed{node: o["b"].node, child: &nmv1beta1.NodeMaintenance{}} },
			started: []string{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := serving(tc.rows)
			if tc.change != nil {
				tc.change(obs)
			}
			before := countOutOfService(tc.rows, obs)
			start(tc.rows, obs, tc.limit, tc.blocked, now, child)
			var started []string
			for _, row := range tc.rows {
				if row.State == nmv1alpha1.NodeDraining && row.StartedAt != nil {
					started = append(started, row.Name)
					if row.Maintenance != child(row.Name) {
						t.Errorf("row %s: maintenance %q", row.Name, row.Maintenance)
					}
				}
			}
			if strings.Join(started, ",") != strings.Join(tc.started, ",") {
				t.Errorf("started %v, want %v", started, tc.started)
			}
			// Starting never takes more nodes out of service than the
			// limit, or than were out before when that was more already.
			if n := countOutOfService(tc.rows, obs); n > max(tc.limit, before) {
				t.Errorf("%d nodes out of service after start (%d before), limit %d", n, before, tc.limit)
			}
		})
	}
}

func TestStartNotesWhomANodeWaitsFor(t *testing.T) {
	rs := rows("Waiting")
	obs := serving(rs)
	obs["a"] = observed{node: obs["a"].node, foreign: "theirs"}
	start(rs, obs, 1, false, now, func(n string) string { return n })
	if rs[0].WaitingFor != "theirs" || rs[0].State != nmv1alpha1.NodeWaiting {
		t.Errorf("row %+v, want Waiting for theirs", rs[0])
	}
}

func succeeded(node string) *nmv1beta1.NodeMaintenance {
	return &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "ro-" + node}, Status: nmv1beta1.NodeMaintenanceStatus{Phase: nmv1beta1.MaintenanceSucceeded}}
}

func jobWith(created time.Time, cond batchv1.JobConditionType) *batchv1.Job {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ro-a", CreationTimestamp: metav1.NewTime(created)}}
	if cond != "" {
		job.Status.Conditions = []batchv1.JobCondition{{Type: cond, Status: corev1.ConditionTrue, Reason: "R", Message: "M"}}
	}
	return job
}

// The per-node state machine, one transition at a time.
func TestAdvance(t *testing.T) {
	sec := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	drainedAt := stamp(now.Add(-10 * time.Second))
	withStep := nmv1alpha1.NodeMaintenanceRolloutSpec{Step: &nmv1alpha1.RolloutStep{Namespace: "ns", Timeout: sec(time.Minute)}}
	failedChild := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "ro-a"}, Status: nmv1beta1.NodeMaintenanceStatus{Phase: nmv1beta1.MaintenanceFailed, LastError: "the drain timed out"}}
	gone := observed{node: readyNode("a")}
	for _, tc := range []advanceCase{
		{name: "draining, child not there yet", row: nmv1alpha1.RolloutNode{State: "Draining"}, obs: gone, want: "Draining"},
		{name: "drained, with a step", row: nmv1alpha1.RolloutNode{State: "Draining"}, obs: observed{node: readyNode("a"), child: succeeded("a")}, spec: withStep, want: "StepRunning"},
		{name: "drained, no hold: restoring in the same pass", row: nmv1alpha1.RolloutNode{State: "Draining"}, obs: observed{node: readyNode("a"), child: succeeded("a")}, want: "Restoring"},
		{name: "drained, held", row: nmv1alpha1.RolloutNode{State: "Draining"}, obs: observed{node: readyNode("a"), child: succeeded("a")}, spec: nmv1alpha1.NodeMaintenanceRolloutSpec{HoldFor: sec(5 * time.Second)}, want: "Holding", wait: 6 * time.Second},
		{name: "drain failed", row: nmv1alpha1.RolloutNode{State: "Draining"}, obs: observed{node: readyNode("a"), child: failedChild}, want: "Failed", reason: "the drain timed out"},
		{name: "hold not over", row: nmv1alpha1.RolloutNode{State: "Holding", DrainedAt: drainedAt}, spec: nmv1alpha1.NodeMaintenanceRolloutSpec{HoldFor: sec(time.Minute)}, want: "Holding", wait: 51 * time.Second},
		{name: "hold over", row: nmv1alpha1.RolloutNode{State: "Holding", DrainedAt: drainedAt}, obs: observed{node: readyNode("a"), child: succeeded("a")}, spec: nmv1alpha1.NodeMaintenanceRolloutSpec{HoldFor: sec(5 * time.Second)}, want: "Restoring"},
		{name: "hold over, the node deleted meanwhile: restoring first, its child deleted (act) before it fails", row: nmv1alpha1.RolloutNode{State: "Holding", DrainedAt: drainedAt},
			spec: nmv1alpha1.NodeMaintenanceRolloutSpec{HoldFor: sec(5 * time.Second)}, want: "Restoring"},
		{name: "step running", row: nmv1alpha1.RolloutNode{State: "StepRunning"}, obs: observed{job: jobWith(now.Add(-time.Second), "")}, spec: withStep, want: "StepRunning", wait: 59 * time.Second},
		{name: "step complete", row: nmv1alpha1.RolloutNode{State: "StepRunning"}, obs: observed{node: readyNode("a"), child: succeeded("a"), job: jobWith(now, batchv1.JobComplete)}, spec: withStep, want: "Restoring"},
		{name: "step failed", row: nmv1alpha1.RolloutNode{State: "StepRunning"}, obs: observed{job: jobWith(now, batchv1.JobFailed)}, spec: withStep, want: "Failed", reason: "ns/ro-a failed: R: M"},
		{name: "step timed out", row: nmv1alpha1.RolloutNode{State: "StepRunning"}, obs: observed{job: jobWith(now.Add(-2*time.Minute), "")}, spec: withStep, want: "Failed", reason: "did not complete within step.timeout 1m0s"},
		{name: "restoring, child still there", row: nmv1alpha1.RolloutNode{State: "Restoring"}, obs: observed{node: readyNode("a"), child: succeeded("a")}, want: "Restoring"},
		{name: "restored, no soak: done in the same pass", row: nmv1alpha1.RolloutNode{State: "Restoring"}, obs: gone, want: "Done"},
		{name: "restored, soaking", row: nmv1alpha1.RolloutNode{State: "Restoring"}, obs: gone, spec: nmv1alpha1.NodeMaintenanceRolloutSpec{SoakFor: sec(2 * time.Second)}, want: "Soaking", wait: 3 * time.Second},
		{name: "restored as it was: cordoned by someone before the rollout", row: nmv1alpha1.RolloutNode{State: "Restoring"},
			obs: observed{node: cordonedNode("a")}, want: "Done"},
		{name: "restored but not Ready", row: nmv1alpha1.RolloutNode{State: "Restoring"},
			obs: observed{node: notReadyNode("a")}, want: "Restoring", reason: "restored but not Ready"},
		{name: "soaking", row: nmv1alpha1.RolloutNode{State: "Soaking", RestoredAt: stamp(now)}, spec: nmv1alpha1.NodeMaintenanceRolloutSpec{SoakFor: sec(2 * time.Second)}, want: "Soaking", wait: 3 * time.Second},
		{name: "soaked", row: nmv1alpha1.RolloutNode{State: "Soaking", RestoredAt: drainedAt}, spec: nmv1alpha1.NodeMaintenanceRolloutSpec{SoakFor: sec(2 * time.Second)}, want: "Done"},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t) })
	}
}

// advanceCase is one transition of a row: from row, with what the cluster
// says, to state want after wait, with a reason that contains reason.
type advanceCase struct {
	name   string
	row    nmv1alpha1.RolloutNode
	obs    observed
	spec   nmv1alpha1.NodeMaintenanceRolloutSpec
	want   nmv1alpha1.RolloutNodeState
	wait   time.Duration
	reason string
}

// check advances the row of node a and returns it.
func (tc advanceCase) check(t *testing.T) nmv1alpha1.RolloutNode {
	t.Helper()
	row := tc.row
	row.Name = "a"
	ro := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "ro"}, Spec: tc.spec}
	wait := advance(&row, tc.obs, ro, now)
	if row.State != tc.want || wait != tc.wait || !strings.Contains(row.Reason, tc.reason) {
		t.Errorf("got %s after %s (reason %q), want %s after %s (reason %q)", row.State, wait, row.Reason, tc.want, tc.wait, tc.reason)
	}
	return row
}

func TestHaltReason(t *testing.T) {
	failed := rows("Done", "Failed", "Failed", "Waiting")
	failed[1].Reason, failed[2].Reason = "drain", "step"
	halt := &nmv1alpha1.NodeMaintenanceRollout{}
	cont := func(n int32) *nmv1alpha1.NodeMaintenanceRollout {
		return &nmv1alpha1.NodeMaintenanceRollout{Spec: nmv1alpha1.NodeMaintenanceRolloutSpec{OnFailure: nmv1alpha1.RolloutContinue, MaxFailures: ptr.To(n)}}
	}
	if got := haltReason(halt, failed); !strings.Contains(got, "node b failed: drain") {
		t.Errorf("Halt: %q does not name the first failed node", got)
	}
	if got := haltReason(cont(2), failed); got != "" {
		t.Errorf("Continue within maxFailures halted: %q", got)
	}
	if got := haltReason(cont(1), failed); !strings.Contains(got, "2 nodes failed, more than maxFailures 1") || !strings.Contains(got, "node c") {
		t.Errorf("Continue beyond maxFailures: %q", got)
	}
	if got := haltReason(halt, rows("Done", "Waiting")); got != "" {
		t.Errorf("no failure halted: %q", got)
	}
}

func TestNamesAreValidAndStable(t *testing.T) {
	long := strings.Repeat("n", 200) + ".example.com"
	for _, tc := range []struct{ rollout, node string }{{"ro", "node-1"}, {"ro", "node.example.com"}, {strings.Repeat("r", 100), long}} {
		child, job := childName(tc.rollout, tc.node), jobName(tc.rollout, tc.node)
		if errs := utilvalidation.IsDNS1123Subdomain(child); len(errs) > 0 {
			t.Errorf("child name %q: %v", child, errs)
		}
		if errs := utilvalidation.IsDNS1123Label(job); len(errs) > 0 {
			t.Errorf("job name %q: %v", job, errs)
		}
		if child != childName(tc.rollout, tc.node) || job != jobName(tc.rollout, tc.node) {
			t.Errorf("names of %s/%s change between calls", tc.rollout, tc.node)
		}
	}
	if jobName("ro", long+"1") == jobName("ro", long+"2") {
		t.Errorf("two long node names share a Job name")
	}
}

func testScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, nmv1beta1.AddToScheme, nmv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestStepJobIsPinnedAndTolerates(t *testing.T) {
	r := &RolloutReconciler{Scheme: testScheme(t)}
	ro := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "ro", UID: "u1"}, Spec: nmv1alpha1.NodeMaintenanceRolloutSpec{Step: &nmv1alpha1.RolloutStep{Namespace: "ops"}}}
	job, err := r.newJob(ro, "n1")
	if err != nil {
		t.Fatal(err)
	}
	pod := job.Spec.Template.Spec
	if job.Namespace != "ops" || pod.NodeName != "n1" || pod.RestartPolicy != corev1.RestartPolicyNever ||
		job.Labels[nmv1alpha1.RolloutLabel] != "ro" || job.Labels[nmv1alpha1.RolloutNodeLabel] != "n1" || !ownedBy(job, ro) {
		t.Errorf("step Job %+v", job)
	}
	for _, taint := range nodestate.MaintenanceTaints {
		tolerated := false
		for _, tol := range pod.Tolerations {
			tolerated = tolerated || (tol.Key == taint.Key && tol.Operator == corev1.TolerationOpExists && tol.Effect == taint.Effect)
		}
		if !tolerated {
			t.Errorf("the step's pod does not tolerate %s", taint.ToString())
		}
	}
}

// One pass over a new rollout resolves the set and creates children for
// maxUnavailable nodes; passes after it create no other child, and the
// status says which nodes were started before their children exist.
func TestPassesStartNoMoreThanMaxUnavailable(t *testing.T) {
	ro := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "ro", UID: "u1"}, Spec: nmv1alpha1.NodeMaintenanceRolloutSpec{
		NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}}, MaxUnavailable: ptr.To(intstr.FromInt32(2))}}
	objs := []client.Object{ro, readyNode("n3"), readyNode("n1"), readyNode("n2")}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithStatusSubresource(ro).WithIndex(&corev1.Pod{}, "spec.nodeName", podNode).Build()
	r := &RolloutReconciler{Client: c, APIReader: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), Now: func() time.Time { return now }}
	for range 3 {
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "ro"}}); err != nil {
			t.Fatal(err)
		}
	}
	children := &nmv1beta1.NodeMaintenanceList{}
	if err := c.List(context.Background(), children); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, nm := range children.Items {
		names = append(names, nm.Name+"@"+nm.Spec.NodeName)
		if nm.Labels[nmv1alpha1.RolloutLabel] != "ro" || nm.Spec.Reason != "rollout ro" {
			t.Errorf("child %s: labels %v reason %q", nm.Name, nm.Labels, nm.Spec.Reason)
		}
	}
	if strings.Join(names, ",") != "ro-n1@n1,ro-n2@n2" {
		t.Errorf("children %v, want ro-n1 and ro-n2", names)
	}
	got := &nmv1alpha1.NodeMaintenanceRollout{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "ro"}, got); err != nil {
		t.Fatal(err)
	}
	st := got.Status
	if st.Phase != nmv1alpha1.RolloutProgressing || st.Total != 3 || st.InProgress != 2 || st.Nodes[2].State != nmv1alpha1.NodeWaiting || st.Nodes[2].Wave != 2 {
		t.Errorf("status %+v", st)
	}
}

// A deleted rollout deletes its children and Jobs, keeps its finalizer
// while a child is there, and lets go once none is.
func TestFinalizeWaitsForTheChildren(t *testing.T) {
	ro := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "ro", UID: "u1", Finalizers: []string{nmv1alpha1.RolloutFinalizer}}}
	child, err := (&RolloutReconciler{Scheme: testScheme(t)}).newChild(ro, "n1")
	if err != nil {
		t.Fatal(err)
	}
	ro.Spec.Step = &nmv1alpha1.RolloutStep{Namespace: "ops"}
	job, err := (&RolloutReconciler{Scheme: testScheme(t)}).newJob(ro, "n1")
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ro, child, job).WithStatusSubresource(ro).Build()
	if err := c.Delete(context.Background(), ro); err != nil {
		t.Fatal(err)
	}
	r := &RolloutReconciler{Client: c, APIReader: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), Now: func() time.Time { return now }}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "ro"}}
	res, err := r.Reconcile(context.Background(), req)
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("first deletion pass: %v, %v; want a requeue while the child is there", res, err)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "ro"}, &nmv1alpha1.NodeMaintenanceRollout{}); err != nil {
		t.Fatalf("the rollout let go while its child was there: %v", err)
	}
	for _, obj := range []client.Object{child, job} {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err == nil {
			t.Errorf("%T %s was not deleted", obj, obj.GetName())
		}
	}
	if _, err := r.Reconcile(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "ro"}, &nmv1alpha1.NodeMaintenanceRollout{}); err == nil {
		t.Errorf("the rollout kept its finalizer once its children were gone")
	}
}

// A pass resumes from the status alone: a row written Draining whose child
// a crashed pass never created gets it (once), and a child that failed
// halts the rollout with the next node left Waiting.
func TestPassResumesFromStatusAndHalts(t *testing.T) {
	ro := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "ro", UID: "u1", Finalizers: []string{nmv1alpha1.RolloutFinalizer}},
		Spec: nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: []string{"n1", "n2", "n3"}}}
	ro.Status.Nodes = []nmv1alpha1.RolloutNode{
		{Name: "n1", Wave: 1, State: nmv1alpha1.NodeDraining, Maintenance: "ro-n1", StartedAt: stamp(now)},
		{Name: "n2", Wave: 2, State: nmv1alpha1.NodeWaiting},
		{Name: "n3", Wave: 3, State: nmv1alpha1.NodeWaiting},
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ro, readyNode("n1"), readyNode("n2"), readyNode("n3")).WithStatusSubresource(ro, &nmv1beta1.NodeMaintenance{}).Build()
	r := &RolloutReconciler{Client: c, APIReader: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), Now: func() time.Time { return now }}
	pass := func() *nmv1alpha1.NodeMaintenanceRollout {
		t.Helper()
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "ro"}}); err != nil {
			t.Fatal(err)
		}
		got := &nmv1alpha1.NodeMaintenanceRollout{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: "ro"}, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	pass()
	pass()
	list := &nmv1beta1.NodeMaintenanceList{}
	if err := c.List(context.Background(), list); err != nil || len(list.Items) != 1 || list.Items[0].Name != "ro-n1" {
		t.Fatalf("children after two passes: %v %v, want ro-n1 alone", list.Items, err)
	}
	nm := &list.Items[0]
	nm.Status.Phase, nm.Status.LastError = nmv1beta1.MaintenanceFailed, "the drain of node n1 timed out"
	if err := c.Status().Update(context.Background(), nm); err != nil {
		t.Fatal(err)
	}
	got := pass()
	if got.Status.Phase != nmv1alpha1.RolloutHalted || !strings.Contains(got.Status.Message, "node n1 failed") || !strings.Contains(got.Status.Message, "timed out") {
		t.Errorf("phase %s message %q, want Halted naming n1 and why", got.Status.Phase, got.Status.Message)
	}
	if got.Status.Nodes[1].State != nmv1alpha1.NodeWaiting || got.Status.Failed != 1 {
		t.Errorf("after the halt: %+v", got.Status)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "ro-n1"}, &nmv1beta1.NodeMaintenance{}); err != nil {
		t.Errorf("the failed node's child was not left in place under Halt: %v", err)
	}
}

// A rollout that waits for a slot says which nodes outside it hold the
// slots: a cordoned node, someone else's maintenance; its own rows do not.
func TestOutsideMessageNamesWhatHoldsTheSlots(t *testing.T) {
	rs := rows("Done", "Draining", "Waiting", "Waiting")
	obs := serving(rs)
	if got := outsideMessage(rs, obs); got != "" {
		t.Errorf("nothing outside the rollout out of service, message %q", got)
	}
	obs["a"].node.Spec.Unschedulable = true
	obs["d"] = observed{node: obs["d"].node, foreign: "theirs"}
	got := outsideMessage(rs, obs)
	if !strings.HasSuffix(got, ": a, d") {
		t.Errorf("message %q, want the cordoned a and the held d, not the rollout's own b", got)
	}
}

// A pass reads the rollout from the cache when the cache holds the version
// the controller last read live or wrote, and live otherwise: a cache still
// behind the last status write, or showing a version someone else wrote, is
// never decided on.
func TestPassReadsTheCacheOnlyAtTheVersionItLastKnew(t *testing.T) {
	ro := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "ro", UID: "u1"}, Spec: nmv1alpha1.NodeMaintenanceRolloutSpec{
		NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}}, MaxUnavailable: ptr.To(intstr.FromInt32(1))}}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ro, readyNode("n1"), readyNode("n2")).WithStatusSubresource(ro).WithIndex(&corev1.Pod{}, "spec.nodeName", podNode).Build()
	liveGets := 0
	live := interceptor.NewClient(c, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*nmv1alpha1.NodeMaintenanceRollout); ok {
			liveGets++
		}
		return c.Get(ctx, key, obj, opts...)
	}})
	// cache is what the informer shows: c itself (caught up), or a copy of
	// an older version.
	var cache client.Client = c
	r := &RolloutReconciler{Client: c, APIReader: live, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), Now: func() time.Time { return now }}
	r.Client = clientReadingFrom{Client: c, reader: func() client.Reader { return cache }}
	pass := func() {
		t.Helper()
		if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "ro"}}); err != nil {
			t.Fatal(err)
		}
	}
	older := &nmv1alpha1.NodeMaintenanceRollout{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "ro"}, older); err != nil {
		t.Fatal(err)
	}
	pass()
	if liveGets != 1 {
		t.Fatalf("first pass: %d live reads, want 1 (nothing known yet)", liveGets)
	}
	pass()
	if liveGets != 1 {
		t.Errorf("a pass on a cache at the version last written: %d live reads in all, want still 1", liveGets)
	}
	// The first pass wrote (the finalizer, the status); a cache still at
	// the version before those writes is behind.
	stale := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(older).WithStatusSubresource(older).Build()
	cache = stale
	pass()
	if liveGets != 2 {
		t.Errorf("a pass on a cache behind the last write: %d live reads in all, want 2", liveGets)
	}
	// Someone else writes: the cache shows a version the controller never
	// knew.
	cache = c
	got := &nmv1alpha1.NodeMaintenanceRollout{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "ro"}, got); err != nil {
		t.Fatal(err)
	}
	got.Spec.Paused = true
	if err := c.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	pass()
	if liveGets != 3 {
		t.Errorf("a pass after another writer's update: %d live reads in all, want 3", liveGets)
	}
}

// clientReadingFrom is a client whose reads of rollouts come from reader()
// (the cache under test) and everything else from Client.
type clientReadingFrom struct {
	client.Client
	reader func() client.Reader
}

func (c clientReadingFrom) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*nmv1alpha1.NodeMaintenanceRollout); ok {
		return c.reader().Get(ctx, key, obj, opts...)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}
