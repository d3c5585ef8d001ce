package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/ledger"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/nodeguard"
)

// These tests drive the reconciler pass by pass against controller-runtime's
// fake client, with a clock the test moves, for the paths the e2e tests on a
// real cluster can only reach slowly (lease expiry and theft, conflicts, a
// damaged record, a deleted node). The e2e tests remain the proof that the
// same paths work against a real API server.

const (
	testNode = "node01"
	testNM   = "maintain-node01"
)

type reconcileEnv struct {
	t        *testing.T
	c        client.WithWatch
	r        *NodeMaintenanceReconciler
	recorder *events.FakeRecorder
	now      time.Time
	// evict answers each eviction call; nil deletes the pod (an accepted
	// eviction whose pod is gone by the next pass).
	evict func(*corev1.Pod) error
	// pods is the reconciler's NodePods, unless a test sets its own.
	pods *listedPods
}

func newReconcileEnv(t *testing.T, funcs interceptor.Funcs, objs ...client.Object) *reconcileEnv {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := nmv1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(objs...).
		WithStatusSubresource(&nmv1beta1.NodeMaintenance{}).
		// The live reads of pods select on these fields (spec.drain.podSelector, budgets' pods).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithIndex(&corev1.Pod{}, "metadata.name", func(o client.Object) []string { return []string{o.GetName()} }).
		WithIndex(&corev1.Node{}, nodeguard.SchedulableIndex, nodeguard.Schedulable).
		WithInterceptorFuncs(funcs).
		Build()
	e := &reconcileEnv{t: t, c: c, recorder: events.NewFakeRecorder(100), now: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
	e.pods = &listedPods{c: c, held: map[string]string{}}
	clock := func() time.Time { return e.now }
	e.r = &NodeMaintenanceReconciler{
		Client: c, APIReader: c, Recorder: e.recorder, Now: clock, Pods: e.pods,
		Leases: &lease.Manager{Client: c, Now: clock},
		Evictor: drain.EvictorFunc(func(ctx context.Context, pod *corev1.Pod, _ *int64) error {
			if e.evict != nil {
				return e.evict(pod)
			}
			return c.Delete(ctx, pod)
		}),
	}
	e.r.Options.defaults()
	return e
}

func (e *reconcileEnv) reconcile() ctrl.Result {
	e.t.Helper()
	res, err := e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: testNM}})
	if err != nil {
		e.t.Fatalf("reconcile: %v", err)
	}
	return res
}

func (e *reconcileEnv) maintenance() *nmv1beta1.NodeMaintenance {
	e.t.Helper()
	nm := &nmv1beta1.NodeMaintenance{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Name: testNM}, nm); err != nil {
		e.t.Fatalf("read NodeMaintenance: %v", err)
	}
	return nm
}

func (e *reconcileEnv) node() *corev1.Node {
	e.t.Helper()
	node := &corev1.Node{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Name: testNode}, node); err != nil {
		e.t.Fatalf("read node: %v", err)
	}
	return node
}

func (e *reconcileEnv) setLeaseHolder(holder string, renewed time.Time) {
	e.t.Helper()
	l := &coordinationv1.Lease{}
	err := e.c.Get(context.Background(), types.NamespacedName{Namespace: lease.Namespace, Name: lease.Name(testNode)}, l)
	if err != nil {
		e.t.Fatalf("read lease: %v", err)
	}
	l.Spec.HolderIdentity = ptr.To(holder)
	l.Spec.RenewTime = &metav1.MicroTime{Time: renewed}
	if err := e.c.Update(context.Background(), l); err != nil {
		e.t.Fatalf("update lease: %v", err)
	}
}

func (e *reconcileEnv) delete() {
	e.t.Helper()
	if err := e.c.Delete(context.Background(), e.maintenance()); err != nil {
		e.t.Fatalf("delete NodeMaintenance: %v", err)
	}
}

// gone reports whether the NodeMaintenance has left the API (finalizer removed).
func (e *reconcileEnv) gone() bool {
	err := e.c.Get(context.Background(), types.NamespacedName{Name: testNM}, &nmv1beta1.NodeMaintenance{})
	return apierrors.IsNotFound(err)
}

// admit gives the reconciler an admission ledger holding entries (node →
// NodeMaintenance), as the webhook would have written them.
func (e *reconcileEnv) admit(entries map[string]string) {
	e.t.Helper()
	e.r.Admissions = &ledger.Ledger{Reader: e.c, Writer: e.c}
	s, err := e.r.Admissions.Read(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	for node, name := range entries {
		s.Entries[node] = ledger.Entry{Name: name, At: e.now}
	}
	if err := e.r.Admissions.Write(context.Background(), s); err != nil {
		e.t.Fatal(err)
	}
}

func (e *reconcileEnv) events() string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return strings.Join(out, "\n")
		}
	}
}

func testObjects() []client.Object {
	return []client.Object{
		readyNode(testNode),
		&nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: testNM, UID: "uid-1"}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: testNode, Reason: "test"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", UID: "pod-1"}, Spec: corev1.PodSpec{NodeName: testNode}},
		// Another node that takes pods: testNode is not the last one.
		readyNode("spare"),
	}
}

func heldLease(holder string, renewed time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: lease.Namespace, Name: lease.Name(testNode)},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](3600),
			RenewTime: &metav1.MicroTime{Time: renewed},
		},
	}
}

func pdbRefusal(*corev1.Pod) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web needs 1 healthy pods and has 1 currently"}}
	return err
}

func assertInMaintenance(t *testing.T, node *corev1.Node, want bool) {
	t.Helper()
	if got := nodestate.InMaintenance(node); got != want {
		t.Fatalf("node in maintenance = %v, want %v (unschedulable %v, taints %v, labels %v)", got, want, node.Spec.Unschedulable, node.Spec.Taints, node.Labels)
	}
	if !want && (node.Spec.Unschedulable || len(node.Spec.Taints) != 0 || node.Labels[nodestate.ExcludeFromRemediationLabel] != "") {
		t.Fatalf("node not restored: unschedulable %v, taints %v, labels %v", node.Spec.Unschedulable, node.Spec.Taints, node.Labels)
	}
}

func TestReconcileLease(t *testing.T) {
	start := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		// lease present before the first pass, if any
		lease *coordinationv1.Lease
		// wantHeldBy is in lastError after the first pass when the lease is not ours.
		wantHeldBy string
	}{
		{name: "no lease: taken"},
		{name: "held by another holder: waits", lease: heldLease("self-node-remediation", start), wantHeldBy: `held by "self-node-remediation"`},
		{name: "expired: taken over", lease: heldLease("self-node-remediation", start.Add(-2*time.Hour))},
		{name: "ours already: renewed", lease: heldLease(lease.Holder, start.Add(-30*time.Minute))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := testObjects()
			if tt.lease != nil {
				objs = append(objs, tt.lease)
			}
			e := newReconcileEnv(t, interceptor.Funcs{}, objs...)
			res := e.reconcile()
			nm := e.maintenance()
			if tt.wantHeldBy != "" {
				if res.RequeueAfter != e.r.Options.LeaseRetryInterval || nm.Status.Phase != nmv1beta1.MaintenanceRunning ||
					!strings.Contains(nm.Status.LastError, tt.wantHeldBy) || nm.Status.ErrorOnLeaseCount != 0 {
					t.Fatalf("result %+v, status %+v; want a wait for the lease, %q in lastError and no count", res, nm.Status, tt.wantHeldBy)
				}
				if _, touched := nm.Annotations[nodestate.PriorStateAnnotation]; touched {
					t.Fatalf("the prior state was recorded although the lease is someone else's")
				}
				assertInMaintenance(t, e.node(), false)
				if ev := e.events(); !strings.Contains(ev, ReasonLeaseNotHeld) {
					t.Fatalf("events %q, want %s", ev, ReasonLeaseNotHeld)
				}
				return
			}
			assertInMaintenance(t, e.node(), true)
			e.reconcile() // the evicted pod is gone now
			nm = e.maintenance()
			if nm.Status.Phase != nmv1beta1.MaintenanceSucceeded || nm.Status.LastError != "" || nm.Status.DrainProgress != 100 {
				t.Fatalf("status %+v, want Succeeded", nm.Status)
			}
			l := &coordinationv1.Lease{}
			if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: lease.Namespace, Name: lease.Name(testNode)}, l); err != nil ||
				ptr.Deref(l.Spec.HolderIdentity, "") != lease.Holder || !l.Spec.RenewTime.Time.Equal(start) {
				t.Fatalf("lease %+v (%v), want held by %s and renewed now", l.Spec, err, lease.Holder)
			}
		})
	}
}

// A lease taken by someone else after the node was cordoned counts once per
// retry interval; more than MaxLeaseErrors in a row restore the node and fail.
func TestReconcileLeaseStolenRestoresAfterMaxErrors(t *testing.T) {
	e := newReconcileEnv(t, interceptor.Funcs{}, testObjects()...)
	e.evict = pdbRefusal // the drain stays Running
	e.reconcile()
	assertInMaintenance(t, e.node(), true)
	e.setLeaseHolder("thief", e.now)

	for i := 1; i <= nmv1beta1.MaxLeaseErrors; i++ {
		e.now = e.now.Add(e.r.Options.LeaseRetryInterval)
		if res := e.reconcile(); res.RequeueAfter != e.r.Options.LeaseRetryInterval {
			t.Fatalf("failure %d: requeue after %v, want the lease retry interval", i, res.RequeueAfter)
		}
		// A pass woken sooner (a pod event) neither retries nor counts.
		e.reconcile()
		nm := e.maintenance()
		if nm.Status.Phase != nmv1beta1.MaintenanceRunning || nm.Status.ErrorOnLeaseCount != i || !strings.Contains(nm.Status.LastError, `held by "thief"`) {
			t.Fatalf("after failure %d: status %+v", i, nm.Status)
		}
		assertInMaintenance(t, e.node(), true)
	}
	e.now = e.now.Add(e.r.Options.LeaseRetryInterval)
	if res := e.reconcile(); !res.IsZero() {
		t.Fatalf("final failure: result %+v, want none (Failed is terminal)", res)
	}
	nm := e.maintenance()
	if nm.Status.Phase != nmv1beta1.MaintenanceFailed || nm.Status.ErrorOnLeaseCount != nmv1beta1.MaxLeaseErrors+1 ||
		!strings.Contains(nm.Status.LastError, "node was restored") {
		t.Fatalf("status %+v, want Failed with the node restored", nm.Status)
	}
	assertInMaintenance(t, e.node(), false)
	if _, ok := nm.Annotations[nodestate.PriorStateAnnotation]; ok {
		t.Fatalf("the prior-state record stays after the restore; a later delete could undo changes made since")
	}
}

// A write that loses a race with another writer is retried: a node patch on a
// re-read of the live node, a status write on the next pass.
func TestReconcileConflicts(t *testing.T) {
	conflict := func(kind string) error {
		return apierrors.NewConflict(schema.GroupResource{Resource: kind}, "x", errors.New("the object has been modified"))
	}
	t.Run("node patch", func(t *testing.T) {
		patches := 0
		e := newReconcileEnv(t, interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*corev1.Node); ok {
				if patches++; patches == 1 {
					return conflict("nodes")
				}
			}
			return c.Patch(ctx, obj, patch, opts...)
		}}, testObjects()...)
		e.reconcile()
		if patches != 2 {
			t.Fatalf("%d node patches, want a conflict and one retry", patches)
		}
		assertInMaintenance(t, e.node(), true)
	})
	t.Run("status write", func(t *testing.T) {
		writes := 0
		e := newReconcileEnv(t, interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if writes++; writes == 1 {
				return conflict("nodemaintenances")
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		}}, testObjects()...)
		if res := e.reconcile(); res.RequeueAfter != conflictRetry {
			t.Fatalf("result %+v after a conflicting status write, want a requeue after %v", res, conflictRetry)
		}
		e.reconcile()
		e.reconcile()
		if nm := e.maintenance(); nm.Status.Phase != nmv1beta1.MaintenanceSucceeded {
			t.Fatalf("status %+v, want Succeeded once the writes go through", nm.Status)
		}
	})
}

// A damaged prior-state record fails the maintenance with the node left in
// maintenance (its schedulability from before is unknown) and says so;
// deleting the NodeMaintenance then uncordons the node.
func TestReconcileCorruptPriorState(t *testing.T) {
	objs := testObjects()
	node := objs[0].(*corev1.Node)
	nodestate.ApplyMaintenance(node)
	nm := objs[1].(*nmv1beta1.NodeMaintenance)
	nm.Annotations = map[string]string{nodestate.PriorStateAnnotation: `{"unschedulable": tru`}
	nm.Finalizers = []string{nmv1beta1.NodeMaintenanceFinalizer}
	nm.Status.Phase = nmv1beta1.MaintenanceRunning
	e := newReconcileEnv(t, interceptor.Funcs{}, objs...)

	if res := e.reconcile(); !res.IsZero() {
		t.Fatalf("result %+v, want none (Failed is terminal)", res)
	}
	got := e.maintenance()
	for _, want := range []string{nodestate.PriorStateAnnotation + " annotation is not valid", "left as the maintenance made it", "Deleting this NodeMaintenance uncordons node " + testNode} {
		if !strings.Contains(got.Status.LastError, want) {
			t.Fatalf("lastError %q does not say %q", got.Status.LastError, want)
		}
	}
	if got.Status.Phase != nmv1beta1.MaintenanceFailed {
		t.Fatalf("phase %q, want Failed", got.Status.Phase)
	}
	assertInMaintenance(t, e.node(), true)
	if ev := e.events(); !strings.Contains(ev, ReasonFailedMaintenance) {
		t.Fatalf("events %q, want %s", ev, ReasonFailedMaintenance)
	}

	e.delete()
	e.reconcile()
	if !e.gone() {
		t.Fatalf("the NodeMaintenance is still there after the restore")
	}
	assertInMaintenance(t, e.node(), false)
}

// A node deleted during the maintenance fails it; deleting the
// NodeMaintenance then finishes without a node to restore and releases the
// lease.
func TestReconcileRestoreAfterNodeDeletion(t *testing.T) {
	e := newReconcileEnv(t, interceptor.Funcs{}, testObjects()...)
	e.evict = pdbRefusal
	e.reconcile()
	if err := e.c.Delete(context.Background(), e.node()); err != nil {
		t.Fatal(err)
	}
	e.now = e.now.Add(time.Second)
	e.reconcile()
	if nm := e.maintenance(); nm.Status.Phase != nmv1beta1.MaintenanceFailed || !strings.Contains(nm.Status.LastError, "node01 was deleted during the maintenance") {
		t.Fatalf("status %+v, want Failed saying the node was deleted", nm.Status)
	}
	e.delete()
	e.reconcile()
	if !e.gone() {
		t.Fatalf("the NodeMaintenance is still there")
	}
	err := e.c.Get(context.Background(), types.NamespacedName{Namespace: lease.Namespace, Name: lease.Name(testNode)}, &coordinationv1.Lease{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("lease after the finalizer: %v, want it released", err)
	}
}

// Blocked evictions leave the maintenance Running with one line per budget
// in lastError, and come back with a growing backoff.
func TestReconcileBlockedDrainBacksOff(t *testing.T) {
	e := newReconcileEnv(t, interceptor.Funcs{}, testObjects()...)
	e.evict = pdbRefusal
	first := e.reconcile()
	second := e.reconcile()
	if first.RequeueAfter != e.r.Options.BlockedBackoffInitial || second.RequeueAfter != 2*e.r.Options.BlockedBackoffInitial {
		t.Fatalf("requeues %v, %v; want the blocked backoff doubling from %v", first.RequeueAfter, second.RequeueAfter, e.r.Options.BlockedBackoffInitial)
	}
	nm := e.maintenance()
	want := "pod shop/web-1 is blocked by a PodDisruptionBudget: The disruption budget web needs 1 healthy pods and has 1 currently"
	if nm.Status.Phase != nmv1beta1.MaintenanceRunning || nm.Status.LastError != want || len(nm.Status.PendingPodsRefs) != 1 {
		t.Fatalf("status %+v, want Running with lastError %q", nm.Status, want)
	}
	if ev := e.events(); !strings.Contains(ev, ReasonEvictionBlocked) || !strings.Contains(ev, ReasonBeginMaintenance) {
		t.Fatalf("events %q", ev)
	}
}

// A finalized NodeMaintenance leaves the webhook's admission ledger, so its
// node is free for the next create at once; another node's entry stays.
func TestReconcileFinalizeReleasesAdmission(t *testing.T) {
	e := newReconcileEnv(t, interceptor.Funcs{}, testObjects()...)
	e.admit(map[string]string{testNode: testNM, "node02": "other"})
	e.reconcile()
	e.reconcile()
	e.delete()
	e.reconcile()
	if !e.gone() {
		t.Fatalf("the NodeMaintenance is still there")
	}
	got, err := e.r.Admissions.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Entries[testNode]; ok || got.Entries["node02"].Name != "other" {
		t.Fatalf("ledger after the finalizer = %v, want only node02's entry", got.Entries)
	}
}

// spec.drain.onTimeout Restore, with the node patch that restores failing
// once: the status says Restoring (not Failed yet), the next pass finishes
// the restore and only then says Failed, and no pass cordons the node again.
func TestReconcileRestoreOnTimeoutIsFinishedAfterAFailedPatch(t *testing.T) {
	failPatches := 0
	objs := testObjects()
	objs[1].(*nmv1beta1.NodeMaintenance).Spec.Drain = &nmv1beta1.DrainPolicy{Timeout: &metav1.Duration{Duration: time.Minute}, OnTimeout: nmv1beta1.DrainTimeoutRestore}
	e := newReconcileEnv(t, interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
		if _, ok := obj.(*corev1.Node); ok && failPatches > 0 {
			failPatches--
			return apierrors.NewServiceUnavailable("the API server is restarting")
		}
		return c.Patch(ctx, obj, patch, opts...)
	}}, objs...)
	e.evict = pdbRefusal
	for range 3 {
		e.reconcile()
	}
	assertInMaintenance(t, e.node(), true)
	e.now = e.now.Add(2 * time.Minute)
	failPatches = 1
	if _, err := e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: testNM}}); err == nil {
		t.Fatal("the pass whose restore patch failed reported no error")
	}
	nm := e.maintenance()
	if nm.Status.Phase != nmv1beta1.MaintenanceRunning || !restorePending(nm) {
		t.Fatalf("after the failed restore: phase %s, restore pending %v, want still Running and the restore pending", nm.Status.Phase, restorePending(nm))
	}
	assertInMaintenance(t, e.node(), true)
	e.reconcile()
	assertInMaintenance(t, e.node(), false)
	if nm := e.maintenance(); restorePending(nm) || nm.Status.Phase != nmv1beta1.MaintenanceFailed {
		t.Fatalf("after the next pass: phase %s, restore pending %v", nm.Status.Phase, restorePending(nm))
	}
	for range 3 {
		e.reconcile()
	}
	assertInMaintenance(t, e.node(), false)
}

// readyNode is a Ready, schedulable Node.
func readyNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

// A NodeMaintenance deleted before the operator added its finalizer is never
// finalized; the pass that finds it gone forgets its admission, so that the
// webhook does not count its node as in maintenance until the entry's TTL.
func TestReconcileOfAGoneMaintenanceReleasesItsAdmission(t *testing.T) {
	e := newReconcileEnv(t, interceptor.Funcs{}, readyNode(testNode))
	e.admit(map[string]string{testNode: testNM, "node02": "maintain-node02"})
	ctx := context.Background()
	e.reconcile() // testNM does not exist
	got, err := e.r.Admissions.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, held := got.Entries[testNode]; held || got.Entries["node02"].Name != "maintain-node02" {
		t.Errorf("ledger after the pass = %v, want only maintain-node02's entry", got.Entries)
	}
}

// servedStale puts *stale into obj, once, when obj is a NodeMaintenance and
// the test set *stale: a read from a cache behind the latest writes.
func servedStale(stale **nmv1beta1.NodeMaintenance, obj client.Object) bool {
	nm, ok := obj.(*nmv1beta1.NodeMaintenance)
	if !ok || *stale == nil {
		return false
	}
	(*stale).DeepCopyInto(nm)
	*stale = nil
	return true
}

// A pass that reads the object as it was before the previous pass's writes
// (a cache that has not caught up) works on its own latest write instead,
// and so does not lose its status write to a conflict.
func TestReconcileReadsItsOwnWrites(t *testing.T) {
	var stale *nmv1beta1.NodeMaintenance
	conflicts := 0
	e := newReconcileEnv(t, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if servedStale(&stale, obj) {
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			err := c.SubResource(sub).Update(ctx, obj, opts...)
			if apierrors.IsConflict(err) {
				conflicts++
			}
			return err
		},
	}, testObjects()...)
	before := e.maintenance()
	e.reconcile() // finalizer, record, cordon, evictions, status
	if e.maintenance().ResourceVersion == before.ResourceVersion {
		t.Fatal("the first pass wrote nothing")
	}
	stale = before // the next read shows the object from before those writes
	e.reconcile()
	if conflicts != 0 {
		t.Errorf("%d conflicting status writes after a stale read, want none", conflicts)
	}
	if nm := e.maintenance(); nm.Status.Phase != nmv1beta1.MaintenanceSucceeded {
		t.Fatalf("status %+v, want Succeeded", nm.Status)
	}
}

// The first pass makes three writes, one after the other, before its first
// eviction: the lease (naming the NodeMaintenance as its owner), one update
// of the NodeMaintenance that carries both the prior-state record and the
// finalizer, and the cordon. No write of the NodeMaintenance comes before
// the lease, and the finalizer never lands without the record.
func TestReconcileFirstPassWritesLeaseThenRecordWithFinalizerThenCordon(t *testing.T) {
	var writes []string
	note := func(what string, obj client.Object) {
		if nm, ok := obj.(*nmv1beta1.NodeMaintenance); ok {
			_, recorded := nm.Annotations[nodestate.PriorStateAnnotation]
			what += fmt.Sprintf(" NodeMaintenance finalizers=%v record=%t", nm.Finalizers, recorded)
		} else {
			what += " " + strings.TrimPrefix(fmt.Sprintf("%T", obj), "*v1.")
		}
		writes = append(writes, what)
	}
	e := newReconcileEnv(t, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			note("create", obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			note("update", obj)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			note("patch", obj)
			return c.Patch(ctx, obj, patch, opts...)
		},
	}, testObjects()...)
	e.reconcile()
	want := []string{
		"create Lease",
		"update NodeMaintenance finalizers=[" + nmv1beta1.NodeMaintenanceFinalizer + "] record=true",
		"patch Node",
	}
	if len(writes) < len(want) || !slices.Equal(writes[:len(want)], want) {
		t.Fatalf("writes before the drain:\n%s\nwant first:\n%s", strings.Join(writes, "\n"), strings.Join(want, "\n"))
	}
	l := &coordinationv1.Lease{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: lease.Namespace, Name: lease.Name(testNode)}, l); err != nil {
		t.Fatal(err)
	}
	nm := e.maintenance()
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != nm.UID || l.OwnerReferences[0].Kind != "NodeMaintenance" ||
		ptr.Deref(l.OwnerReferences[0].Controller, false) {
		t.Fatalf("lease owners %+v; want the NodeMaintenance %s (%s), not as controller", l.OwnerReferences, nm.Name, nm.UID)
	}
}

// A maintenance deleted after its lease was taken and before its record
// (with the finalizer) was written is gone at once, having no finalizer;
// the pass whose record write finds it gone releases the lease itself.
func TestReconcileRecordWriteOfADeletedMaintenanceReleasesTheLease(t *testing.T) {
	e := newReconcileEnv(t, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if nm, ok := obj.(*nmv1beta1.NodeMaintenance); ok && len(nm.Finalizers) > 0 {
				// The user's delete lands between the lease and the record.
				if err := c.Delete(ctx, &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: nm.Name}}); err != nil {
					return err
				}
			}
			return c.Update(ctx, obj, opts...)
		},
	}, testObjects()...)
	e.reconcile()
	if !e.gone() {
		t.Fatal("the NodeMaintenance is still there")
	}
	err := e.c.Get(context.Background(), types.NamespacedName{Namespace: lease.Namespace, Name: lease.Name(testNode)}, &coordinationv1.Lease{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("lease of the deleted maintenance: %v; want it released", err)
	}
	assertInMaintenance(t, e.node(), false)
}

// The pass that cordons the node and evicts its first pods may never write
// its status: the operator dies, or the API server refuses the write. The
// next pass finds no counts and the evicted pods gone; it counts the node
// as the record has it from before the first eviction, not the pods left.
func TestReconcileCountsThePodsEvictedBeforeALostStatusWrite(t *testing.T) {
	objs := testObjects()
	for _, name := range []string{"web-2", "web-3"} {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("pod-" + name)},
			Spec: corev1.PodSpec{NodeName: testNode}})
	}
	refuse := true
	e := newReconcileEnv(t, interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if refuse {
				return apierrors.NewForbidden(schema.GroupResource{Group: nmv1beta1.GroupVersion.Group, Resource: "nodemaintenances/status"}, testNM, errors.New("fault test"))
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}, objs...)
	// One pod a pass, as a budget of maxUnavailable 1 allows (the round's
	// evictions are made in parallel).
	var mu sync.Mutex
	evicted := 0
	e.evict = func(pod *corev1.Pod) error {
		mu.Lock()
		defer mu.Unlock()
		if evicted == 1 {
			return pdbRefusal(pod)
		}
		evicted++
		return e.c.Delete(context.Background(), pod)
	}
	if _, err := e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: testNM}}); err == nil {
		t.Fatal("the pass whose status write was refused returned no error")
	}
	if evicted != 1 {
		t.Fatalf("%d pods evicted by the pass whose status write was refused, want 1", evicted)
	}
	prior, err := nodestate.Decode(e.maintenance().Annotations[nodestate.PriorStateAnnotation])
	if err != nil || prior.Pods == nil || *prior.Pods != (nodestate.PodCounts{Total: 3, ToEvict: 3}) {
		t.Fatalf("record after the first pass: %+v (%v), want 3 pods counted, 3 to evict", prior.Pods, err)
	}

	refuse, evicted = false, 0
	e.reconcile()
	got := e.maintenance().Status
	if got.Phase != nmv1beta1.MaintenanceRunning || got.TotalPods != 3 || got.EvictionPods != 3 || len(got.PendingPods) != 2 {
		t.Errorf("status after the lost write: phase %s, totalpods %d, evictionPods %d, pending %v; want Running, 3, 3, 2 pending",
			got.Phase, got.TotalPods, got.EvictionPods, got.PendingPods)
	}
}
