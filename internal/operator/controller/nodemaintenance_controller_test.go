package controller

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
)

// A NodeMaintenance for a node that does not exist fails once, with a
// lastError that says so, and is not retried; it gets no finalizer, having
// touched nothing. (The webhook refuses such a
// create; this covers a node that vanished before the first reconcile.)
func TestReconcileMissingNodeFailsWithoutRetry(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = nmv1beta1.AddToScheme(scheme)
	nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "m", UID: "u"}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: "ghost"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(nm).WithStatusSubresource(nm).Build()
	recorder := events.NewFakeRecorder(10)
	r := &NodeMaintenanceReconciler{Client: c, APIReader: c, Recorder: recorder, Leases: &lease.Manager{Client: c}, Pods: &listedPods{c: c, held: map[string]string{}}}
	r.Options.defaults()

	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "m"}})
	if err != nil || res.RequeueAfter != 0 {
		t.Fatalf("reconcile = %+v, %v; want no error and no requeue", res, err)
	}
	got := &nmv1beta1.NodeMaintenance{}
	_ = c.Get(context.Background(), types.NamespacedName{Name: "m"}, got)
	if got.Status.Phase != nmv1beta1.MaintenanceFailed || !strings.Contains(got.Status.LastError, "node ghost does not exist") {
		t.Fatalf("status = %+v", got.Status)
	}
	if len(got.Finalizers) != 0 {
		// Nothing to restore: its deletion need not wait for a finalize pass.
		t.Fatalf("finalizers %v on a maintenance that never touched its node; want none", got.Finalizers)
	}
	if ev := <-recorder.Events; !strings.Contains(ev, ReasonFailedMaintenance) {
		t.Fatalf("event %q", ev)
	}
	// A second pass changes nothing.
	res, err = r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "m"}})
	if err != nil || res.RequeueAfter != 0 {
		t.Fatalf("second reconcile = %+v, %v", res, err)
	}
}
