package rollout

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
)

// podNode indexes pods by spec.nodeName, as the API server's field
// selector does, for the fake client.
func podNode(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }

func controlledBy(kind, name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, Controller: ptr.To(true)}}
}

func TestAvailability(t *testing.T) {
	gen := func(g int64) metav1.ObjectMeta { return metav1.ObjectMeta{Generation: g} }
	deploy := func(want, available, updated int32, observed int64) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: gen(2), Spec: appsv1.DeploymentSpec{Replicas: ptr.To(want)},
			Status: appsv1.DeploymentStatus{AvailableReplicas: available, UpdatedReplicas: updated, ObservedGeneration: observed}}
	}
	rs := func(want, available int32) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: gen(1), Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(want)},
			Status: appsv1.ReplicaSetStatus{AvailableReplicas: available, ObservedGeneration: 1}}
	}
	sts := func(want, available, ready int32) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: gen(1), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(want)},
			Status: appsv1.StatefulSetStatus{AvailableReplicas: available, ReadyReplicas: ready, ObservedGeneration: 1}}
	}
	for _, tc := range []struct {
		name string
		obj  client.Object
		ok   bool
		how  string
	}{
		{"Deployment available", deploy(3, 3, 3, 2), true, "3 of 3 available"},
		{"Deployment short of available", deploy(3, 1, 3, 2), false, "1 of 3 available"},
		{"Deployment not all updated", deploy(3, 3, 2, 2), false, "3 of 3 available, 2 updated"},
		{"Deployment spec not observed", deploy(3, 3, 3, 1), false, "its controller has not seen generation 2 yet"},
		{"Deployment scaled to 0", deploy(0, 0, 0, 2), true, "0 of 0 available"},
		{"Deployment more available than wanted", deploy(2, 3, 3, 2), true, "3 of 2 available"},
		{"Deployment replicas unset is 1", &appsv1.Deployment{Status: appsv1.DeploymentStatus{}}, false, "0 of 1 available"},
		{"ReplicaSet available", rs(2, 2), true, "2 of 2 available"},
		{"ReplicaSet short", rs(2, 1), false, "1 of 2 available"},
		{"StatefulSet available and ready", sts(3, 3, 3), true, "3 of 3 available"},
		{"StatefulSet short of available", sts(3, 2, 3), false, "2 of 3 available"},
		{"StatefulSet not all ready", sts(3, 3, 2), false, "3 of 3 available, 2 ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, how := availability(tc.obj)
			if ok != tc.ok || !strings.Contains(how, tc.how) {
				t.Errorf("got %v %q, want %v %q", ok, how, tc.ok, tc.how)
			}
		})
	}
}

// The recovery part of the state machine: Restoring, Recovering, Soaking.
func TestAdvanceRecovery(t *testing.T) {
	sec := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	web := []string{"Deployment a/web: 1 of 3 available"}
	restoredAgo := func(d time.Duration) nmv1alpha1.RolloutNode {
		return nmv1alpha1.RolloutNode{State: "Recovering", RestoredAt: stamp(now.Add(-d)), Workloads: []string{"Deployment a/web"}}
	}
	ready, waiting := observed{node: readyNode("a")}, observed{node: readyNode("a"), unrecovered: web}
	for _, tc := range []struct {
		advanceCase
		recovered bool
	}{
		{advanceCase{name: "restored, workloads available, no soak", row: nmv1alpha1.RolloutNode{State: "Restoring"}, obs: ready, want: "Done"}, true},
		{advanceCase{name: "restored, workloads available, soaking", row: nmv1alpha1.RolloutNode{State: "Restoring"}, obs: ready,
			spec: nmv1alpha1.NodeMaintenanceRolloutSpec{SoakFor: sec(time.Minute)}, want: "Soaking", wait: 61 * time.Second}, true},
		{advanceCase{name: "restored, a workload short", row: nmv1alpha1.RolloutNode{State: "Restoring"}, obs: waiting, want: "Recovering", wait: recoveryRetry,
			reason: "at most recoveryTimeout 10m0s"}, false},
		{advanceCase{name: "restored under NodeReady, a workload short", row: nmv1alpha1.RolloutNode{State: "Restoring"}, obs: waiting,
			spec: nmv1alpha1.NodeMaintenanceRolloutSpec{RecoveryGate: nmv1alpha1.RecoveryNodeReady}, want: "Done"}, true},
		{advanceCase{name: "recovering, short", row: restoredAgo(time.Minute), obs: waiting, want: "Recovering", wait: recoveryRetry}, false},
		{advanceCase{name: "recovering, short, timeout near", row: restoredAgo(time.Minute), obs: waiting,
			spec: nmv1alpha1.NodeMaintenanceRolloutSpec{RecoveryTimeout: sec(62 * time.Second)}, want: "Recovering", wait: 3 * time.Second}, false},
		{advanceCase{name: "recovered, soak counted from the restore", row: restoredAgo(time.Minute), obs: ready,
			spec: nmv1alpha1.NodeMaintenanceRolloutSpec{SoakFor: sec(2 * time.Minute)}, want: "Soaking", wait: 61 * time.Second}, true},
		{advanceCase{name: "recovered after the soak's end", row: restoredAgo(time.Minute), obs: ready,
			spec: nmv1alpha1.NodeMaintenanceRolloutSpec{SoakFor: sec(time.Second)}, want: "Done"}, true},
		{advanceCase{name: "timed out", row: restoredAgo(2*time.Minute + 2*time.Second), obs: waiting,
			spec: nmv1alpha1.NodeMaintenanceRolloutSpec{RecoveryTimeout: sec(2 * time.Minute)}, want: "Failed",
			reason: "workloads not recovered within recoveryTimeout 2m0s: Deployment a/web: 1 of 3 available"}, false},
		{advanceCase{name: "the default timeout", row: restoredAgo(11 * time.Minute), obs: waiting, want: "Failed", reason: "within recoveryTimeout 10m0s"}, false},
		{advanceCase{name: "node NotReady again", row: restoredAgo(time.Minute), obs: observed{node: notReadyNode("a")}, want: "Recovering", wait: recoveryRetry}, false},
		{advanceCase{name: "node NotReady past the timeout", row: restoredAgo(time.Hour), obs: observed{node: notReadyNode("a")}, want: "Failed",
			reason: "within recoveryTimeout 10m0s: node a is not Ready"}, false},
		{advanceCase{name: "node deleted", row: restoredAgo(time.Minute), obs: observed{}, want: "Failed", reason: "deleted while its workloads recovered"}, false},
		{advanceCase{name: "soaking needs nothing more", row: nmv1alpha1.RolloutNode{State: "Soaking", RestoredAt: stamp(now.Add(-time.Minute)), RecoveredAt: stamp(now.Add(-time.Second))},
			obs: waiting, spec: nmv1alpha1.NodeMaintenanceRolloutSpec{SoakFor: sec(time.Second)}, want: "Done"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := tc.check(t)
			if recovered := row.RecoveredAt != nil && row.RecoveredAt.Equal(stamp(now)); recovered != tc.recovered {
				t.Errorf("recoveredAt %v, want it stamped now: %v", row.RecoveredAt, tc.recovered)
			}
			if tc.want == "Recovering" && strings.Join(row.WaitingForWorkloads, ";") != strings.Join(tc.obs.unrecovered, ";") {
				t.Errorf("waitingForWorkloads %q, want %q", row.WaitingForWorkloads, tc.obs.unrecovered)
			}
			if tc.recovered && row.WaitingForWorkloads != nil {
				t.Errorf("a recovered row still waits for %q", row.WaitingForWorkloads)
			}
		})
	}
}

// The workloads recorded for a node are the controllers of the pods its
// drain evicts, by drain.NewPlan's rules, a Deployment's ReplicaSet as the
// Deployment.
func TestWorkloadsOfThePodsTheDrainEvicts(t *testing.T) {
	pod := func(name string, owners []metav1.OwnerReference, labels map[string]string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, OwnerReferences: owners, Labels: labels}, Spec: corev1.PodSpec{NodeName: "n1"}}
	}
	mirror := pod("static", nil, nil)
	mirror.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
	pods := []corev1.Pod{
		pod("web-1", controlledBy("ReplicaSet", "web-5d8f"), map[string]string{"tier": "front"}),
		pod("web-2", controlledBy("ReplicaSet", "web-5d8f"), map[string]string{"tier": "front"}),
		pod("loose-1", controlledBy("ReplicaSet", "loose"), nil),
		pod("gone-1", controlledBy("ReplicaSet", "gone"), nil),
		pod("db-0", controlledBy("StatefulSet", "db"), map[string]string{"tier": "back"}),
		pod("agent-x", controlledBy("DaemonSet", "agent"), nil),
		pod("batch-x", []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "batch", Controller: ptr.To(true)}}, nil),
		pod("bare", nil, nil),
		mirror,
		pod("kept-1", controlledBy("StatefulSet", "kept"), map[string]string{nmv1beta1.DrainLabel: nmv1beta1.DrainLabelSkip}),
	}
	sets := map[string]*appsv1.ReplicaSet{
		"web-5d8f": {ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web-5d8f", OwnerReferences: controlledBy("Deployment", "web")}},
		"loose":    {ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "loose"}},
	}
	reads := map[string]int{}
	getRS := func(_ context.Context, key client.ObjectKey) (*appsv1.ReplicaSet, error) {
		reads[key.Name]++
		return sets[key.Name], nil
	}
	got, err := workloadsOf(context.Background(), pods, drain.Rules{Now: now}, getRS)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Deployment a/web, ReplicaSet a/loose, StatefulSet a/db"; strings.Join(got, ", ") != want {
		t.Errorf("workloads %q, want %s", got, want)
	}
	// One read per ReplicaSet, however many of its pods the node runs (a
	// request each, on a pass that starts many nodes).
	if want := map[string]int{"web-5d8f": 1, "loose": 1, "gone": 1}; !maps.Equal(reads, want) {
		t.Errorf("ReplicaSet reads %v, want %v", reads, want)
	}
	// spec.drain.podSelector narrows the drain, and the record with it.
	sel := &nmv1beta1.DrainPolicy{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "back"}}}
	got, err = workloadsOf(context.Background(), pods, drain.Rules{Policy: sel, Now: now}, getRS)
	if err != nil || strings.Join(got, ", ") != "StatefulSet a/db" {
		t.Errorf("under a podSelector: %q %v, want StatefulSet a/db alone", got, err)
	}
	broken := func(context.Context, client.ObjectKey) (*appsv1.ReplicaSet, error) {
		return nil, errors.New("forbidden")
	}
	if _, err := workloadsOf(context.Background(), pods, drain.Rules{Now: now}, broken); err == nil || !strings.Contains(err.Error(), "ReplicaSet a/") {
		t.Errorf("a ReplicaSet that cannot be read: %v, want an error naming it", err)
	}
}

func TestParseWorkload(t *testing.T) {
	for in, want := range map[string]bool{"Deployment a/web": true, "StatefulSet ns/db-x": true, "Deployment web": false, "Deployment": false, "Deployment /web": false} {
		w, ok := parseWorkload(in)
		if ok != want || (ok && w.String() != in) {
			t.Errorf("parseWorkload(%q) = %v %v", in, w, ok)
		}
	}
}

// A node waiting for a slot names the workloads of the Recovering rows
// that hold the slots; a free slot, a pause or a halt name none.
func TestRecoveryBlockers(t *testing.T) {
	rs := rows("Recovering", "Waiting")
	rs[0].WaitingForWorkloads = []string{"Deployment a/web: 1 of 3 available"}
	s := &scope{ro: &nmv1alpha1.NodeMaintenanceRollout{}, status: &nmv1alpha1.NodeMaintenanceRolloutStatus{Nodes: rs}, obs: serving(rs), maxUnavailable: 1}
	got := recoveryBlockers(s)
	if len(got) != 1 || got[0] != "node a holds its slot until its workloads are fully available again: Deployment a/web: 1 of 3 available" {
		t.Errorf("blockers %q", got)
	}
	if msg := blockersMessage(got); !strings.Contains(msg, "the next node waits: node a holds its slot") {
		t.Errorf("message tail %q", msg)
	}
	s.maxUnavailable = 2
	if got := recoveryBlockers(s); got != nil {
		t.Errorf("a free slot, blockers %q", got)
	}
	s.maxUnavailable, s.ro.Spec.Paused = 1, true
	if got := recoveryBlockers(s); got != nil {
		t.Errorf("paused, blockers %q", got)
	}
}

// A pass that starts a node records the workloads on it in the status it
// writes before it creates the child, from the node's pods read live.
func TestStartRecordsTheWorkloadsBeforeTheChild(t *testing.T) {
	ro := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "ro", UID: "u1", Finalizers: []string{nmv1alpha1.RolloutFinalizer}},
		Spec: nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: []string{"n1", "n2"}}}
	ro.Status.Nodes = []nmv1alpha1.RolloutNode{{Name: "n1", Wave: 1, State: "Waiting"}, {Name: "n2", Wave: 2, State: "Waiting"}}
	objs := []client.Object{ro, readyNode("n1"), readyNode("n2"),
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web-5d8f", OwnerReferences: controlledBy("Deployment", "web")}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web-1", OwnerReferences: controlledBy("ReplicaSet", "web-5d8f")}, Spec: corev1.PodSpec{NodeName: "n1"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "db-0", OwnerReferences: controlledBy("StatefulSet", "db")}, Spec: corev1.PodSpec{NodeName: "n2"}},
	}
	created := false
	checkRecorded := func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		got := &nmv1alpha1.NodeMaintenanceRollout{}
		if err := c.Get(ctx, client.ObjectKey{Name: "ro"}, got); err != nil {
			return err
		}
		if w := got.Status.Nodes[0].Workloads; strings.Join(w, ",") != "Deployment a/web" {
			t.Errorf("when the child is created, row n1 records %q, want Deployment a/web", w)
		}
		created = true
		return c.Create(ctx, obj, opts...)
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).WithStatusSubresource(ro).
		WithIndex(&corev1.Pod{}, "spec.nodeName", podNode).WithInterceptorFuncs(interceptor.Funcs{Create: checkRecorded}).Build()
	r := &RolloutReconciler{Client: c, APIReader: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), Now: func() time.Time { return now }}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "ro"}}); err != nil {
		t.Fatal(err)
	}
	if !created {
		t.Fatal("the pass created no child")
	}
	got := &nmv1alpha1.NodeMaintenanceRollout{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "ro"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Nodes[1].State != "Waiting" || got.Status.Nodes[1].Workloads != nil {
		t.Errorf("row n2, not started, is %+v", got.Status.Nodes[1])
	}
}

// A pass reads each workload its deciding rows recorded once, however many
// rows recorded it, and only for the rows whose recovery it decides.
func TestReadRecoveryReadsEachWorkloadOnce(t *testing.T) {
	short := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
		Status: appsv1.DeploymentStatus{AvailableReplicas: 1, UpdatedReplicas: 3}}
	whole := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "db"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
		Status: appsv1.DeploymentStatus{AvailableReplicas: 1, UpdatedReplicas: 1}}
	reads := map[string]int{}
	var mu sync.Mutex
	count := func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		mu.Lock()
		reads[key.String()]++
		mu.Unlock()
		return c.Get(ctx, key, obj, opts...)
	}
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(short, whole).WithInterceptorFuncs(interceptor.Funcs{Get: count}).Build()
	r := &RolloutReconciler{APIReader: c}
	both := []string{"Deployment a/db", "Deployment a/web"}
	s := &scope{ro: &nmv1alpha1.NodeMaintenanceRollout{}, status: &nmv1alpha1.NodeMaintenanceRolloutStatus{Nodes: []nmv1alpha1.RolloutNode{
		{Name: "n1", State: "Recovering", Workloads: both},
		{Name: "n2", State: "Restoring", Workloads: []string{"Deployment a/web"}},
		{Name: "n3", State: "Restoring", Workloads: []string{"Deployment a/other"}}, // its child is still there
		{Name: "n4", State: "Draining", Workloads: []string{"Deployment a/draining"}},
	}}, obs: map[string]observed{"n1": {}, "n2": {}, "n3": {child: succeeded("n3")}, "n4": {}}}
	r.readRecovery(context.Background(), s)
	if want := map[string]int{"a/web": 1, "a/db": 1}; !maps.Equal(reads, want) {
		t.Errorf("reads %v, want %v", reads, want)
	}
	for node, want := range map[string]string{"n1": "Deployment a/web: 1 of 3 available", "n2": "Deployment a/web: 1 of 3 available", "n3": "", "n4": ""} {
		if got := strings.Join(s.obs[node].unrecovered, "; "); got != want {
			t.Errorf("row %s waits for %q, want %q", node, got, want)
		}
	}
}
