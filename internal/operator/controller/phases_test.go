package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
)

// conflictNextStatusWrite makes the next status write, once armed, lose a
// race.
func conflictNextStatusWrite(armed *bool) interceptor.Funcs {
	return interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
		if *armed {
			*armed = false
			return apierrors.NewConflict(schema.GroupResource{Resource: "nodemaintenances"}, obj.GetName(), errors.New("the object has been modified"))
		}
		return c.SubResource(sub).Update(ctx, obj, opts...)
	}}
}

// What a pass does after its status write (the events that report the
// status, the blocked backoff) waits for that write: a pass that loses it
// says and remembers nothing, and the next pass decides again.
func TestReconcileLostStatusWriteLeavesNoTrace(t *testing.T) {
	t.Run("blocked backoff", func(t *testing.T) {
		armed := false
		e := newReconcileEnv(t, conflictNextStatusWrite(&armed), testObjects()...)
		e.evict = pdbRefusal
		armed = true
		if res := e.reconcile(); res.RequeueAfter != conflictRetry {
			t.Fatalf("result %+v after a lost status write, want a requeue after %v", res, conflictRetry)
		}
		if res := e.reconcile(); res.RequeueAfter != e.r.Options.BlockedBackoffInitial {
			t.Fatalf("result %+v, want the first blocked backoff %v: the lost pass took no step", res, e.r.Options.BlockedBackoffInitial)
		}
	})
	t.Run("failed event", func(t *testing.T) {
		objs := testObjects()
		objs[1].(*nmv1beta1.NodeMaintenance).Spec.Drain = &nmv1beta1.DrainPolicy{Timeout: &metav1.Duration{Duration: time.Minute}}
		armed := false
		e := newReconcileEnv(t, conflictNextStatusWrite(&armed), objs...)
		e.evict = pdbRefusal
		e.reconcile()
		e.events()
		e.now = e.now.Add(2 * time.Minute)
		armed = true
		if res := e.reconcile(); res.RequeueAfter != conflictRetry {
			t.Fatalf("result %+v after a lost status write, want a requeue after %v", res, conflictRetry)
		}
		if ev := e.events(); strings.Contains(ev, ReasonFailedMaintenance) {
			t.Fatalf("events %q after a lost write of Failed", ev)
		}
		if nm := e.maintenance(); nm.Status.Phase != nmv1beta1.MaintenanceRunning {
			t.Fatalf("phase %s, want Running until Failed is written", nm.Status.Phase)
		}
		if res := e.reconcile(); !res.IsZero() {
			t.Fatalf("result %+v, want none (Failed is terminal)", res)
		}
		if nm := e.maintenance(); nm.Status.Phase != nmv1beta1.MaintenanceFailed {
			t.Fatalf("phase %s, want Failed", nm.Status.Phase)
		}
		if ev := e.events(); strings.Count(ev, ReasonFailedMaintenance) != 1 {
			t.Fatalf("events %q, want one %s", ev, ReasonFailedMaintenance)
		}
	})
}

// A pass that finds the node out of maintenance and the object gone from
// the API server (its finalizer ran since the cache's copy) ends there: it
// neither cordons the node again nor evicts its pods.
func TestReconcileOfAMaintenanceGoneMidPassTouchesNothing(t *testing.T) {
	var goneAfter int // NodeMaintenance reads left before they say NotFound; 0: never
	e := newReconcileEnv(t, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*nmv1beta1.NodeMaintenance); ok && goneAfter > 0 {
			if goneAfter--; goneAfter == 0 {
				return apierrors.NewNotFound(schema.GroupResource{Resource: "nodemaintenances"}, key.Name)
			}
		}
		return c.Get(ctx, key, obj, opts...)
	}}, testObjects()...)
	evictions := 0
	e.evict = func(pod *corev1.Pod) error { evictions++; return pdbRefusal(pod) }
	e.reconcile()
	assertInMaintenance(t, e.node(), true)
	node := e.node()
	nodestate.Restore(node, nodestate.Prior{})
	if err := e.c.Update(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	evictions = 0
	goneAfter = 2 // the pass reads the object from the cache, then live
	if res := e.reconcile(); !res.IsZero() {
		t.Fatalf("result %+v, want none: the object is gone", res)
	}
	assertInMaintenance(t, e.node(), false)
	if evictions != 0 {
		t.Fatalf("%d evictions from a node whose maintenance is gone", evictions)
	}
}
