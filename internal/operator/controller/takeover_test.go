package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
)

var (
	unschedulableTaint = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	drainTaint         = corev1.Taint{Key: nodestate.DrainTaintKey, Effect: corev1.TaintEffectNoSchedule}
	userTaint          = corev1.Taint{Key: "example.com/gpu", Value: "a100", Effect: corev1.TaintEffectNoSchedule}
)

func TestStartedElsewhere(t *testing.T) {
	medik8sNode := &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{unschedulableTaint, drainTaint}}}
	cordonedOnly := &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{unschedulableTaint}}}
	ours := []metav1.Condition{{Type: nmv1beta1.ConditionCordoned, Status: metav1.ConditionFalse, Reason: nmv1beta1.ReasonRestored}}
	record := map[string]string{nodestate.PriorStateAnnotation: nodestate.Prior{}.Encode()}
	tests := []struct {
		name        string
		phase       nmv1beta1.MaintenancePhase
		annotations map[string]string
		conditions  []metav1.Condition
		node        *corev1.Node
		want        bool
	}{
		{name: "medik8s, Running", phase: nmv1beta1.MaintenanceRunning, node: medik8sNode, want: true},
		{name: "medik8s, Succeeded", phase: nmv1beta1.MaintenanceSucceeded, node: medik8sNode, want: true},
		{name: "medik8s, Failed: its node was given back", phase: nmv1beta1.MaintenanceFailed, node: medik8sNode},
		{name: "never reconciled", node: medik8sNode},
		{name: "ours: recorded", phase: nmv1beta1.MaintenanceRunning, annotations: record, node: medik8sNode},
		{name: "ours: restored, record removed", phase: nmv1beta1.MaintenanceSucceeded, conditions: ours, node: medik8sNode},
		{name: "cordoned without the drain taint: a cordon of someone else", phase: nmv1beta1.MaintenanceRunning, node: cordonedOnly},
		{name: "untouched node", phase: nmv1beta1.MaintenanceRunning, node: &corev1.Node{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Annotations: tt.annotations},
				Status: nmv1beta1.NodeMaintenanceStatus{Phase: tt.phase, Conditions: tt.conditions}}
			if got := startedElsewhere(nm, tt.node); got != tt.want {
				t.Fatalf("startedElsewhere = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAdoptedTotal(t *testing.T) {
	for _, tt := range []struct{ now, eviction, pending, want int }{
		{now: 4, eviction: 5, pending: 2, want: 7}, // 3 of 5 gone, 2 staying (DaemonSets)
		{now: 2, eviction: 0, pending: 0, want: 2},
		{now: 6, eviction: 3, pending: 5, want: 6}, // more pending than counted: nothing gone
	} {
		if got := adoptedTotal(tt.now, tt.eviction, tt.pending); got != tt.want {
			t.Errorf("adoptedTotal(%d, %d, %d) = %d, want %d", tt.now, tt.eviction, tt.pending, got, tt.want)
		}
	}
}

// medik8sObjects is what the medik8s node-maintenance-operator leaves in the
// middle of a drain: the node cordoned with both taints and the label (and
// a taint of the user's), a NodeMaintenance Running with its finalizer and
// counts and no record, its lease (holder, renewed, 3600 s).
func medik8sObjects(phase nmv1beta1.MaintenancePhase, holder string, renewed time.Time) []client.Object {
	node := readyNode(testNode)
	node.Spec.Unschedulable = true
	node.Spec.Taints = []corev1.Taint{userTaint, unschedulableTaint, drainTaint}
	node.Labels = map[string]string{nodestate.ExcludeFromRemediationLabel: "true", "team": "storage"}
	nm := &nmv1beta1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: testNM, UID: "uid-1", Finalizers: []string{nmv1beta1.NodeMaintenanceFinalizer}},
		Spec:       nmv1beta1.NodeMaintenanceSpec{NodeName: testNode, Reason: "RAM"},
		Status: nmv1beta1.NodeMaintenanceStatus{Phase: phase, EvictionPods: 3, DrainProgress: 33, ErrorOnLeaseCount: 1,
			PendingPods: []string{"web-1", "web-2"}, LastError: "Cannot evict pod as it would violate the pod's disruption budget."},
	}
	return []client.Object{node, nm, readyNode("spare"), heldLease(holder, renewed),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", UID: "pod-1"}, Spec: corev1.PodSpec{NodeName: testNode}},
		// Evicted by the other operator, still terminating: waited for, not evicted again.
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-2", UID: "pod-2", Finalizers: []string{"example.com/slow"},
			DeletionTimestamp: &metav1.Time{Time: time.Date(2026, 12, 4, 11, 59, 0, 0, time.UTC)}}, Spec: corev1.PodSpec{NodeName: testNode}},
	}
}

// countEvictions makes every eviction delete its pod, and counts them by pod.
func countEvictions(e *reconcileEnv) map[string]int {
	evicted := map[string]int{}
	e.evict = func(p *corev1.Pod) error {
		evicted[p.Name]++
		return e.c.Delete(context.Background(), p)
	}
	return evicted
}

func (e *reconcileEnv) finishTermination(ns, name string) {
	e.t.Helper()
	p := &corev1.Pod{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, p); err != nil {
		e.t.Fatal(err)
	}
	p.Finalizers = nil
	if err := e.c.Update(context.Background(), p); err != nil {
		e.t.Fatal(err)
	}
}

func (e *reconcileEnv) lease() (*coordinationv1.Lease, error) {
	l := &coordinationv1.Lease{}
	err := e.c.Get(context.Background(), types.NamespacedName{Namespace: lease.Namespace, Name: lease.Name(testNode)}, l)
	return l, err
}

// assertRestoredTheMedik8sWay: schedulable, both medik8s taints and the
// label gone, the user's taint and label kept, the lease released.
func assertRestoredTheMedik8sWay(t *testing.T, e *reconcileEnv) {
	t.Helper()
	n := e.node()
	if n.Spec.Unschedulable || len(n.Spec.Taints) != 1 || n.Spec.Taints[0] != userTaint {
		t.Fatalf("node: unschedulable %v, taints %v; want schedulable with only %v", n.Spec.Unschedulable, n.Spec.Taints, userTaint)
	}
	if _, ok := n.Labels[nodestate.ExcludeFromRemediationLabel]; ok || n.Labels["team"] != "storage" {
		t.Fatalf("node labels %v; want the exclude label gone and team kept", n.Labels)
	}
	if _, err := e.lease(); !apierrors.IsNotFound(err) {
		t.Fatalf("lease: %v; want it released", err)
	}
}

// A Running medik8s maintenance (lease ours and live, or expired) is carried
// on: adopted with a record that says so, the lease renewed, the pod left
// evicted once, the terminating one waited for; Succeeded; then restored
// the medik8s way on deletion.
func TestReconcileAdoptsARunningMedik8sMaintenance(t *testing.T) {
	start := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	for _, renewed := range []time.Time{start.Add(-30 * time.Minute), start.Add(-3 * time.Hour)} {
		t.Run("renewed "+start.Sub(renewed).String()+" ago", func(t *testing.T) {
			e := newReconcileEnv(t, interceptor.Funcs{}, medik8sObjects(nmv1beta1.MaintenanceRunning, lease.Holder, renewed)...)
			evicted := countEvictions(e)
			e.reconcile()
			nm := e.maintenance()
			prior, err := nodestate.Decode(nm.Annotations[nodestate.PriorStateAnnotation])
			if err != nil || !prior.Adopted || prior.Unschedulable || len(prior.PresentTaints) != 0 {
				t.Fatalf("record %+v (%v); want one that says adopted, with nothing of the node's maintenance state", prior, err)
			}
			c := meta.FindStatusCondition(nm.Status.Conditions, nmv1beta1.ConditionCordoned)
			if c == nil || c.Reason != nmv1beta1.ReasonAdopted || !strings.Contains(c.Message, "prior node state was not recorded") {
				t.Fatalf("Cordoned condition %+v; want reason %s saying the prior state was not recorded", c, nmv1beta1.ReasonAdopted)
			}
			if l, err := e.lease(); err != nil || !l.Spec.RenewTime.Time.Equal(start) || ptr.Deref(l.Spec.HolderIdentity, "") != lease.Holder {
				t.Fatalf("lease %+v (%v); want it held by %s and renewed now", l.Spec, err, lease.Holder)
			}
			if nm.Status.EvictionPods != 3 || nm.Status.TotalPods != 2+1 || nm.Status.Phase != nmv1beta1.MaintenanceRunning {
				t.Fatalf("status %+v; want the other operator's evictionPods kept, totalPods 3 (2 on the node, 1 gone), Running", nm.Status)
			}
			e.reconcile()
			e.finishTermination("shop", "web-2")
			e.reconcile()
			if nm = e.maintenance(); nm.Status.Phase != nmv1beta1.MaintenanceSucceeded || nm.Status.DrainProgress != 100 {
				t.Fatalf("status %+v; want Succeeded", nm.Status)
			}
			if len(evicted) != 1 || evicted["web-1"] != 1 {
				t.Fatalf("evictions %v; want web-1 once and nothing else", evicted)
			}
			if ev := e.events(); !strings.Contains(ev, ReasonAdoptedMaintenance) {
				t.Fatalf("events %q; want %s", ev, ReasonAdoptedMaintenance)
			}
			e.delete()
			e.reconcile()
			if !e.gone() {
				t.Fatal("the NodeMaintenance is still there after its finalize pass")
			}
			assertRestoredTheMedik8sWay(t, e)
			if ev := e.events(); !strings.Contains(ev, "medik8s way") {
				t.Fatalf("events %q; want the restore to say it was the medik8s way", ev)
			}
		})
	}
}

// A Succeeded medik8s maintenance is adopted by the pass that keeps the
// lease, and restored the medik8s way.
func TestReconcileAdoptsASucceededMedik8sMaintenance(t *testing.T) {
	objs := medik8sObjects(nmv1beta1.MaintenanceSucceeded, lease.Holder, time.Date(2026, 12, 4, 11, 0, 0, 0, time.UTC))
	e := newReconcileEnv(t, interceptor.Funcs{}, objs[:4]...) // no pods
	e.reconcile()
	nm := e.maintenance()
	if prior, err := nodestate.Decode(nm.Annotations[nodestate.PriorStateAnnotation]); err != nil || !prior.Adopted {
		t.Fatalf("record %+v (%v); want adopted", prior, err)
	}
	if c := meta.FindStatusCondition(nm.Status.Conditions, nmv1beta1.ConditionCordoned); c == nil || c.Reason != nmv1beta1.ReasonAdopted {
		t.Fatalf("Cordoned condition %+v; want reason %s", c, nmv1beta1.ReasonAdopted)
	}
	if !meta.IsStatusConditionTrue(nm.Status.Conditions, nmv1beta1.ConditionDrained) || nm.Status.Phase != nmv1beta1.MaintenanceSucceeded {
		t.Fatalf("status %+v; want Succeeded and Drained", nm.Status)
	}
	e.delete()
	e.reconcile()
	assertRestoredTheMedik8sWay(t, e)
}

// A medik8s-looking maintenance whose lease another holder has, live, is
// someone else's: the node is not touched, nothing is recorded, the status
// says why, and no lease error is counted.
func TestReconcileDoesNotAdoptWhileAnotherHolderHasTheLease(t *testing.T) {
	start := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	e := newReconcileEnv(t, interceptor.Funcs{}, medik8sObjects(nmv1beta1.MaintenanceRunning, "self-node-remediation", start)...)
	evicted := countEvictions(e)
	before := e.node()
	e.reconcile()
	nm := e.maintenance()
	if _, recorded := nm.Annotations[nodestate.PriorStateAnnotation]; recorded {
		t.Fatal("a record was written for a maintenance whose lease someone else holds")
	}
	if !strings.Contains(nm.Status.LastError, "in maintenance by another operator") || !strings.Contains(nm.Status.LastError, `held by "self-node-remediation"`) ||
		nm.Status.ErrorOnLeaseCount != 1 { // the other operator's count, untouched
		t.Fatalf("status %+v; want lastError naming both and the count unchanged", nm.Status)
	}
	if c := meta.FindStatusCondition(nm.Status.Conditions, nmv1beta1.ConditionLeaseHeld); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("LeaseHeld condition %+v; want False", c)
	}
	if after := e.node(); after.ResourceVersion != before.ResourceVersion || len(evicted) != 0 {
		t.Fatalf("the node was changed (%v) or pods evicted (%v)", after.Spec, evicted)
	}
}

// A medik8s maintenance deleted before this operator adopted it is restored
// the medik8s way by its finalize pass.
func TestReconcileRestoresAMedik8sMaintenanceDeletedBeforeAdoption(t *testing.T) {
	e := newReconcileEnv(t, interceptor.Funcs{}, medik8sObjects(nmv1beta1.MaintenanceRunning, lease.Holder, time.Date(2026, 12, 4, 11, 0, 0, 0, time.UTC))...)
	e.delete()
	e.reconcile()
	if !e.gone() {
		t.Fatal("the NodeMaintenance is still there after its finalize pass")
	}
	assertRestoredTheMedik8sWay(t, e)
}

// A finalize pass that comes again after this operator's own restore (its
// record removed, the lease released) leaves the node as restored: a drain
// taint the node had before the maintenance stays.
func TestReconcileRetriedFinalizeKeepsADrainTaintFromBefore(t *testing.T) {
	node := readyNode(testNode)
	node.Spec.Taints = []corev1.Taint{drainTaint}
	nm := &nmv1beta1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: testNM, UID: "uid-1", Finalizers: []string{nmv1beta1.NodeMaintenanceFinalizer}},
		Spec:       nmv1beta1.NodeMaintenanceSpec{NodeName: testNode},
		Status: nmv1beta1.NodeMaintenanceStatus{Phase: nmv1beta1.MaintenanceSucceeded, Conditions: []metav1.Condition{
			{Type: nmv1beta1.ConditionCordoned, Status: metav1.ConditionTrue, Reason: nmv1beta1.ReasonCordoned, LastTransitionTime: metav1.Now()}}},
	}
	e := newReconcileEnv(t, interceptor.Funcs{}, node, nm, readyNode("spare"))
	e.delete()
	e.reconcile()
	if n := e.node(); len(n.Spec.Taints) != 1 || n.Spec.Taints[0] != drainTaint {
		t.Fatalf("taints %v; want the drain taint from before kept", n.Spec.Taints)
	}
}
