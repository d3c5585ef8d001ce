package rollout

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// A child this controller deleted moments ago is not deleted again when a
// pass reads it from a cache that does not show the deletion yet; one
// deleted longer ago than deletedRecently is (the deletion may have been
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
	now = now.Add(deletedRecently)
	if err := r.deleteObject(context.Background(), stale); err != nil {
		t.Fatal(err)
	}
	if deletes != 2 {
		t.Errorf("%d deletes after deletedRecently, want a second one", deletes)
	}
}
