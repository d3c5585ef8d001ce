package rollout

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// A child this controller deleted moments ago is not deleted again when a
// pass reads it from a cache that does not show the deletion yet; one
// deleted longer ago than writtenRecently is (the deletion may have been
// lost with the object's re-creation, or the cache is stuck).
func TestDeleteObjectOnceWhileTheCacheCatchesUp(t *testing.T) {
	now := time.Date(2026, 12, 6, 14, 0, 0, 0, time.UTC)
	child := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "ro-n1", UID: "uid-1", Finalizers: []string{nmv1beta1.NodeMaintenanceFinalizer}},
		Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: "n1"}}
	deletes := 0
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(child).WithInterceptorFuncs(interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			deletes++
			return c.Delete(ctx, obj, opts...)
		}}).Build()
	r := &RolloutReconciler{Client: c, Now: func() time.Time { return now }}
	stale := child.DeepCopy() // as a cache shows it before the deletion
	for range 2 {
		if err := r.deleteObject(context.Background(), stale); err != nil {
			t.Fatal(err)
		}
	}
	if deletes != 1 {
		t.Errorf("%d deletes of a child read twice before the cache showed the deletion, want 1", deletes)
	}
	now = now.Add(writtenRecently)
	if err := r.deleteObject(context.Background(), stale); err != nil {
		t.Fatal(err)
	}
	if deletes != 2 {
		t.Errorf("%d deletes after writtenRecently, want a second one", deletes)
	}
}

// A child this controller created moments ago is not created again when a
// pass reads a cache that does not show it yet (the second create would
// only come back AlreadyExists, through the admission webhook); once the
// cache shows it, or writtenRecently later, a missing child is created
// again (someone deleted it).
func TestEnsureChildCreatesOnceWhileTheCacheCatchesUp(t *testing.T) {
	now := time.Date(2026, 12, 7, 7, 0, 0, 0, time.UTC)
	creates := 0
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			creates++
			return c.Create(ctx, obj, opts...)
		}}).Build()
	r := &RolloutReconciler{Client: c, Scheme: testScheme(t), Now: func() time.Time { return now }}
	ro := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "ro", UID: "ro-uid"}}
	s := &scope{ro: ro}
	row := nmv1alpha1.RolloutNode{Name: "n1", State: nmv1alpha1.NodeDraining}
	ensure := func(o observed) {
		t.Helper()
		if err := r.ensureChild(context.Background(), s, row, o); err != nil {
			t.Fatal(err)
		}
	}
	ensure(observed{})
	ensure(observed{}) // the cache has not seen the create
	if creates != 1 {
		t.Fatalf("%d creates of a child read twice before the cache showed it, want 1", creates)
	}
	child := &nmv1beta1.NodeMaintenance{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: childName("ro", "n1")}, child); err != nil {
		t.Fatal(err)
	}
	ensure(observed{child: child}) // the cache shows it
	if err := c.Delete(context.Background(), child); err != nil {
		t.Fatal(err)
	}
	ensure(observed{}) // someone deleted it
	if creates != 2 {
		t.Errorf("%d creates after the cache showed the child and it was deleted, want a second one", creates)
	}
	if err := c.Delete(context.Background(), child); err != nil {
		t.Fatal(err)
	}
	ensure(observed{}) // deleted again before the cache ever showed the new one
	now = now.Add(writtenRecently)
	ensure(observed{})
	if creates != 3 {
		t.Errorf("%d creates writtenRecently after a create the cache never showed, want a third one", creates)
	}
}
