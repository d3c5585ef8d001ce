package controller

import (
	"context"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/ledger"
)

// The writes a maintenance does not need: a pass on a copy of the object
// the cache has not caught up with, a second status write where counts
// alone changed.

// Once a pass has finalized a maintenance, a pass that reads it from a
// cache that has not seen the finalizer's removal writes nothing (it would
// restore again, and lose its writes to the deletion), and the pass of the
// object's deletion does not read the admission ledger live for the entry
// the finalize released.
func TestReconcileAfterItsFinalizeLeavesAStaleCopyAndTheLedgerAlone(t *testing.T) {
	var stale *nmv1beta1.NodeMaintenance
	writes, ledgerReads := 0, 0
	e := newReconcileEnv(t, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if servedStale(&stale, obj) {
				return nil
			}
			if _, ok := obj.(*coordinationv1.Lease); ok && key.Name == ledger.LedgerName {
				ledgerReads++
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			writes++
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			writes++
			return c.Patch(ctx, obj, patch, opts...)
		},
	}, testObjects()...)
	e.admit(map[string]string{testNode: testNM})
	ctx := context.Background()
	e.reconcile()
	e.reconcile()
	e.delete()
	deleting := e.maintenance()
	e.reconcile()
	if !e.gone() {
		t.Fatal("the NodeMaintenance is still there after its finalize pass")
	}
	assertInMaintenance(t, e.node(), false)

	writes, ledgerReads = 0, 0
	stale = deleting // the cache still shows it deleting, with its finalizer
	e.reconcile()
	if writes != 0 {
		t.Errorf("%d writes by the pass that read the finalized maintenance from a stale cache, want none", writes)
	}
	e.reconcile() // the object is gone
	if ledgerReads != 0 {
		t.Errorf("%d live reads of the admission ledger after the finalize released the entry, want none", ledgerReads)
	}
	got, err := e.r.Admissions.ReadLive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, held := got.Entries[testNode]; held {
		t.Errorf("ledger after the finalize: %v, want %s's entry released", got.Entries, testNM)
	}
	if e.r.releasedHere(testNM) || len(e.r.state) != 0 {
		t.Errorf("the reconciler still remembers the gone maintenance: %d entries", len(e.r.state))
	}
}

// A drain whose evictions were all accepted says WaitingForPods from the
// pass that evicted them: the pass after it, which sees the pods
// terminating, changes only counts and writes nothing, so a drain whose
// pods go fast writes its status twice (started, drained), not three times.
func TestReconcileWaitsForPodsFromTheRoundThatEvictedThem(t *testing.T) {
	statusWrites := 0
	objs := testObjects()
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			p.Finalizers = []string{"test/terminating"} // evicted, it stays terminating until the test lets it go
		}
	}
	e := newReconcileEnv(t, interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			statusWrites++
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}, objs...)
	e.reconcile()
	c := meta.FindStatusCondition(e.maintenance().Status.Conditions, nmv1beta1.ConditionDrained)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != nmv1beta1.ReasonWaiting {
		t.Fatalf("Drained after the pass that evicted every pod: %+v, want False %s", c, nmv1beta1.ReasonWaiting)
	}
	pod := &corev1.Pod{}
	if err := e.c.Get(context.Background(), types.NamespacedName{Namespace: "shop", Name: "web-1"}, pod); err != nil || pod.DeletionTimestamp == nil {
		t.Fatalf("the evicted pod: %v, deleting %v; want it terminating", err, pod.DeletionTimestamp)
	}
	e.reconcile() // the pod terminating
	pod.Finalizers = nil
	if err := e.c.Update(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	e.reconcile() // the pod gone
	if nm := e.maintenance(); nm.Status.Phase != nmv1beta1.MaintenanceSucceeded {
		t.Fatalf("phase %s, want Succeeded", nm.Status.Phase)
	}
	if statusWrites != 2 {
		t.Errorf("%d status writes, want 2: the drain started (waiting for its pods), and drained", statusWrites)
	}
}

// An object created again under the name of one this process finalized is
// not taken for it: the deletion's pass of the new one releases its
// admission (forgetEarlier).
func TestReconcileForgetsAFinalizedObjectWhenItsNameComesBack(t *testing.T) {
	e := newReconcileEnv(t, interceptor.Funcs{}, testObjects()...)
	e.admit(map[string]string{testNode: testNM})
	e.reconcile()
	e.reconcile()
	e.delete()
	e.reconcile()
	if !e.gone() || !e.r.releasedHere(testNM) {
		t.Fatalf("the first object: gone %v, released here %v; want both", e.gone(), e.r.releasedHere(testNM))
	}
	again := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: testNM, UID: "uid-2"}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: testNode, Reason: "again"}}
	if err := e.c.Create(context.Background(), again); err != nil {
		t.Fatal(err)
	}
	e.reconcile()
	if e.r.releasedHere(testNM) {
		t.Error("the new object of the same name is taken for the finalized one: its admission would not be released")
	}
}
