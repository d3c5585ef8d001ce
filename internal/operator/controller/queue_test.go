package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
)

var queueEpoch = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

// queuedNM is a NodeMaintenance created at second sec, shaped by opts.
func queuedNM(name string, sec int, opts ...func(*nmv1beta1.NodeMaintenance)) nmv1beta1.NodeMaintenance {
	nm := nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name),
		CreationTimestamp: metav1.NewTime(queueEpoch.Add(time.Duration(sec) * time.Second))}}
	for _, o := range opts {
		o(&nm)
	}
	return nm
}

func touchedNM(nm *nmv1beta1.NodeMaintenance) {
	nm.Annotations = map[string]string{nodestate.PriorStateAnnotation: nodestate.Prior{}.Encode()}
}
func failedNM(nm *nmv1beta1.NodeMaintenance) { nm.Status.Phase = nmv1beta1.MaintenanceFailed }
func deletingNM(nm *nmv1beta1.NodeMaintenance) {
	nm.DeletionTimestamp = ptr.To(metav1.NewTime(queueEpoch))
}
func grantedNM(nm *nmv1beta1.NodeMaintenance) {
	meta.SetStatusCondition(&nm.Status.Conditions, metav1.Condition{Type: nmv1beta1.ConditionQueued, Status: metav1.ConditionFalse, Reason: nmv1beta1.ReasonSlotAcquired})
}
func waitingNM(nm *nmv1beta1.NodeMaintenance) {
	nm.Status.Phase = nmv1beta1.MaintenanceRunning
	meta.SetStatusCondition(&nm.Status.Conditions, metav1.Condition{Type: nmv1beta1.ConditionQueued, Status: metav1.ConditionTrue, Reason: nmv1beta1.ReasonWaitingForSlot})
}

func names(nms []*nmv1beta1.NodeMaintenance) string {
	out := make([]string, 0, len(nms))
	for _, nm := range nms {
		out = append(out, nm.Name)
	}
	return strings.Join(out, ",")
}

// The rule: slots held (record on the node's maintenance, or a grant) plus
// those waiting ahead in (creationTimestamp, name) order must stay below the
// limit; Failed without a record, deleting-but-never-started and later
// maintenances do not count.
func TestQueuePosition(t *testing.T) {
	self := queuedNM("self", 10)
	tests := []struct {
		name                   string
		others                 []nmv1beta1.NodeMaintenance
		granted                []string
		limit                  int
		wantHolding, wantAhead string
		wantStart              bool
	}{
		{name: "alone", limit: 1, wantStart: true},
		{name: "one cordoned holds the only slot", limit: 1, others: []nmv1beta1.NodeMaintenance{queuedNM("a", 20, touchedNM)},
			wantHolding: "a"},
		{name: "a grant in the status holds a slot", limit: 2,
			others:      []nmv1beta1.NodeMaintenance{queuedNM("a", 1, touchedNM), queuedNM("b", 2, grantedNM)},
			wantHolding: "a,b"},
		{name: "a grant only in memory holds a slot", limit: 1, granted: []string{"z"},
			others:      []nmv1beta1.NodeMaintenance{queuedNM("z", 10)},
			wantHolding: "z"},
		{name: "earlier waiting ones are ahead", limit: 2,
			others:      []nmv1beta1.NodeMaintenance{queuedNM("a", 1, touchedNM), queuedNM("b", 5, waitingNM), queuedNM("c", 11, waitingNM)},
			wantHolding: "a", wantAhead: "b"},
		{name: "same second: the name decides", limit: 1,
			others: []nmv1beta1.NodeMaintenance{queuedNM("alpha", 10), queuedNM("zulu", 10)}, wantAhead: "alpha"},
		{name: "restored after a failure gives the slot back", limit: 1,
			others: []nmv1beta1.NodeMaintenance{queuedNM("a", 1, grantedNM, failedNM)}, wantStart: true},
		{name: "failed and left cordoned keeps it", limit: 1,
			others: []nmv1beta1.NodeMaintenance{queuedNM("a", 1, touchedNM, failedNM)}, wantHolding: "a"},
		{name: "deleting but still cordoned keeps it", limit: 1,
			others: []nmv1beta1.NodeMaintenance{queuedNM("a", 1, touchedNM, deletingNM)}, wantHolding: "a"},
		{name: "deleting and never started is not ahead", limit: 1,
			others: []nmv1beta1.NodeMaintenance{queuedNM("a", 1, waitingNM, deletingNM)}, wantStart: true},
		{name: "a granted later one counts though the limit grew", limit: 3,
			others:      []nmv1beta1.NodeMaintenance{queuedNM("a", 1, touchedNM), queuedNM("later", 30, touchedNM), queuedNM("b", 2, waitingNM)},
			wantHolding: "a,later", wantAhead: "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			granted := map[types.UID]bool{}
			for _, n := range tt.granted {
				granted[types.UID("uid-"+n)] = true
			}
			all := append([]nmv1beta1.NodeMaintenance{self}, tt.others...)
			q := queuePosition(&self, all, granted)
			if got := names(q.holding); got != tt.wantHolding {
				t.Errorf("holding = %q, want %q", got, tt.wantHolding)
			}
			if got := names(q.ahead); got != tt.wantAhead {
				t.Errorf("ahead = %q, want %q", got, tt.wantAhead)
			}
			if got := q.mayStart(tt.limit); got != tt.wantStart {
				t.Errorf("mayStart(%d) = %v, want %v", tt.limit, got, tt.wantStart)
			}
		})
	}
}

// queueEnv is a fake cluster with three nodes and three NodeMaintenances
// created a second apart, and an operator with --max-unavailable=1.
func queueEnv(t *testing.T, funcs interceptor.Funcs) *reconcileEnv {
	var objs []client.Object
	for i := 1; i <= 3; i++ {
		node := fmt.Sprintf("node%02d", i)
		objs = append(objs, readyNode(node),
			&nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "maintain-" + node, UID: types.UID("uid-" + node),
				CreationTimestamp: metav1.NewTime(queueEpoch.Add(time.Duration(i) * time.Second))},
				Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node}})
	}
	e := newReconcileEnv(t, funcs, objs...)
	e.r.Options.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	return e
}

func (e *reconcileEnv) reconcileNamed(name string) ctrl.Result {
	e.t.Helper()
	res, err := e.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
	if err != nil {
		e.t.Fatalf("reconcile %s: %v", name, err)
	}
	return res
}

func (e *reconcileEnv) named(name string) *nmv1beta1.NodeMaintenance {
	e.t.Helper()
	nm := &nmv1beta1.NodeMaintenance{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Name: name}, nm); err != nil {
		e.t.Fatalf("read %s: %v", name, err)
	}
	return nm
}

func (e *reconcileEnv) nodeNamed(name string) *corev1.Node {
	e.t.Helper()
	node := &corev1.Node{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Name: name}, node); err != nil {
		e.t.Fatalf("read node %s: %v", name, err)
	}
	return node
}

// Reconciled last first, the maintenances still start in creation order: the
// later ones wait, untouched and without a lease, naming who they wait for;
// deleting the first lets the second start; a queued one deleted just goes.
func TestReconcileQueue(t *testing.T) {
	e := queueEnv(t, interceptor.Funcs{})
	for _, name := range []string{"maintain-node03", "maintain-node02", "maintain-node01", "maintain-node02", "maintain-node03"} {
		e.reconcileNamed(name)
	}
	assertInMaintenance(t, e.nodeNamed("node01"), true)
	for _, n := range []string{"node02", "node03"} {
		nm := e.named("maintain-" + n)
		c := meta.FindStatusCondition(nm.Status.Conditions, nmv1beta1.ConditionQueued)
		if nm.Status.Phase != nmv1beta1.MaintenanceRunning || c == nil || c.Status != metav1.ConditionTrue || c.Reason != nmv1beta1.ReasonWaitingForSlot {
			t.Fatalf("%s: phase %q, Queued %+v; want Running, queued", nm.Name, nm.Status.Phase, c)
		}
		assertInMaintenance(t, e.nodeNamed(n), false)
		if _, ok := nm.Annotations[nodestate.PriorStateAnnotation]; ok {
			t.Errorf("%s: a queued maintenance recorded its node's state", nm.Name)
		}
		if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: lease.Namespace, Name: lease.Name(n)}, &coordinationv1.Lease{}); err == nil {
			t.Errorf("%s: a queued maintenance has a lease", nm.Name)
		}
	}
	msg := meta.FindStatusCondition(e.named("maintain-node03").Status.Conditions, nmv1beta1.ConditionQueued).Message
	if want := "queued behind maintain-node01, maintain-node02: --max-unavailable=1 lets 1 of 3 nodes"; !strings.HasPrefix(msg, want) {
		t.Errorf("Queued message %q, want it to start with %q", msg, want)
	}

	// The first ends: the second starts, the third still waits.
	if err := e.c.Delete(context.Background(), e.named("maintain-node01")); err != nil {
		t.Fatal(err)
	}
	e.reconcileNamed("maintain-node01")
	e.reconcileNamed("maintain-node03")
	e.reconcileNamed("maintain-node02")
	assertInMaintenance(t, e.nodeNamed("node01"), false)
	assertInMaintenance(t, e.nodeNamed("node02"), true)
	assertInMaintenance(t, e.nodeNamed("node03"), false)
	if c := meta.FindStatusCondition(e.named("maintain-node02").Status.Conditions, nmv1beta1.ConditionQueued); c == nil || c.Status != metav1.ConditionFalse || c.Reason != nmv1beta1.ReasonSlotAcquired {
		t.Errorf("maintain-node02 started with Queued %+v, want False SlotAcquired", c)
	}

	// The third, deleted while queued, goes without touching anything.
	if err := e.c.Delete(context.Background(), e.named("maintain-node03")); err != nil {
		t.Fatal(err)
	}
	e.reconcileNamed("maintain-node03")
	if err := e.c.Get(context.Background(), types.NamespacedName{Name: "maintain-node03"}, &nmv1beta1.NodeMaintenance{}); err == nil {
		t.Error("a queued maintenance deleted kept its finalizer")
	}
	assertInMaintenance(t, e.nodeNamed("node03"), false)
	if evs := e.events(); !strings.Contains(evs, "Queued") {
		t.Errorf("no Queued event; events:\n%s", evs)
	}
}

// A maintenance that still waits when the queue moves rewrites whom it waits
// behind at most once every queueStatusInterval, and does once it has
// passed.
func TestReconcileQueueRewritesItsPlaceAtMostEveryInterval(t *testing.T) {
	e := queueEnv(t, interceptor.Funcs{})
	for _, name := range []string{"maintain-node01", "maintain-node02", "maintain-node03"} {
		e.reconcileNamed(name)
	}
	queuedMsg := func() string {
		return meta.FindStatusCondition(e.named("maintain-node03").Status.Conditions, nmv1beta1.ConditionQueued).Message
	}
	before := queuedMsg()
	if !strings.HasPrefix(before, "queued behind maintain-node01, maintain-node02:") {
		t.Fatalf("Queued message %q", before)
	}
	if err := e.c.Delete(context.Background(), e.named("maintain-node01")); err != nil {
		t.Fatal(err)
	}
	e.reconcileNamed("maintain-node01")
	res := e.reconcileNamed("maintain-node03")
	if got := queuedMsg(); got != before {
		t.Errorf("rewritten at once: %q", got)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > queueStatusInterval {
		t.Errorf("result %+v, want a requeue within %v to write it", res, queueStatusInterval)
	}
	e.now = e.now.Add(queueStatusInterval)
	e.reconcileNamed("maintain-node03")
	if got := queuedMsg(); !strings.HasPrefix(got, "queued behind maintain-node02:") {
		t.Errorf("after %v, Queued message %q, want it behind maintain-node02 alone", queueStatusInterval, got)
	}
}

// A grant whose status write has not reached the reader yet still counts:
// the second maintenance, decided against a stale view, waits.
func TestReconcileQueueCountsGrantsNotYetSeen(t *testing.T) {
	e := queueEnv(t, interceptor.Funcs{})
	// Simulate the stale cache: the grant exists only in memory.
	e.r.granted = map[types.UID]bool{"uid-node03": true}
	e.reconcileNamed("maintain-node01")
	assertInMaintenance(t, e.nodeNamed("node01"), false)
	c := meta.FindStatusCondition(e.named("maintain-node01").Status.Conditions, nmv1beta1.ConditionQueued)
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "queued behind maintain-node03") {
		t.Fatalf("Queued %+v, want True behind maintain-node03", c)
	}
}

// A maintenance queued under a limit the operator no longer has starts, and
// says so.
func TestReconcileQueuedStartsWithoutALimit(t *testing.T) {
	e := queueEnv(t, interceptor.Funcs{})
	e.r.Options.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	e.reconcileNamed("maintain-node01")
	e.reconcileNamed("maintain-node02")
	if !queued(e.named("maintain-node02")) {
		t.Fatal("maintain-node02 is not queued under --max-unavailable=1")
	}
	e.r.Options.MaxUnavailable = nil
	e.reconcileNamed("maintain-node02")
	assertInMaintenance(t, e.nodeNamed("node02"), true)
	c := meta.FindStatusCondition(e.named("maintain-node02").Status.Conditions, nmv1beta1.ConditionQueued)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != nmv1beta1.ReasonSlotAcquired {
		t.Errorf("Queued %+v, want False SlotAcquired", c)
	}
}

// A grant whose status write failed is written again by the next pass,
// before the lease is taken and the node touched.
func TestReconcileQueueRewritesALostGrant(t *testing.T) {
	fail := true
	e := queueEnv(t, interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
		if fail {
			fail = false
			return apierrors.NewConflict(schema.GroupResource{Resource: "nodemaintenances"}, obj.GetName(), errors.New("changed"))
		}
		return c.SubResource(sub).Update(ctx, obj, opts...)
	}})
	if res := e.reconcileNamed("maintain-node01"); res.RequeueAfter == 0 {
		t.Fatalf("a pass whose grant was not written went on: %+v", res)
	}
	assertInMaintenance(t, e.nodeNamed("node01"), false)
	e.reconcileNamed("maintain-node01")
	if !grantedInStatus(e.named("maintain-node01")) {
		t.Error("the grant was not written by the next pass")
	}
	assertInMaintenance(t, e.nodeNamed("node01"), true)
}

// A percentage is of all the nodes, rounded down, at least one, as the
// webhook counts it (validation.MaxUnavailableNodes).
func TestReconcileQueuePercentage(t *testing.T) {
	e := queueEnv(t, interceptor.Funcs{})
	e.r.Options.MaxUnavailable = ptr.To(intstr.FromString("50%"))
	e.reconcileNamed("maintain-node01")
	e.reconcileNamed("maintain-node02")
	assertInMaintenance(t, e.nodeNamed("node01"), true)
	assertInMaintenance(t, e.nodeNamed("node02"), false)
	c := meta.FindStatusCondition(e.named("maintain-node02").Status.Conditions, nmv1beta1.ConditionQueued)
	if want := "queued behind maintain-node01: --max-unavailable=50% lets 1 of 3 nodes"; c == nil || !strings.HasPrefix(c.Message, want) {
		t.Errorf("Queued %+v, want a message starting %q", c, want)
	}
}
