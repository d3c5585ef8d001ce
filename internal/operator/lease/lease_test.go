package lease

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// The namespace of the leases is created when the API server says it is
// missing, and not asked for on every lease.
func TestObtainCreatesTheNamespaceOnlyWhenMissing(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	namespaces := 0
	nsExists := false
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			switch obj.(type) {
			case *corev1.Namespace:
				namespaces++
				nsExists = true
			case *coordinationv1.Lease:
				if !nsExists { // what the API server answers in a missing namespace
					return apierrors.NewNotFound(corev1.Resource("namespaces"), Namespace)
				}
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	m := &Manager{Client: c}
	for _, node := range []string{"node01", "node02"} {
		if err := m.Obtain(context.Background(), node); err != nil {
			t.Fatalf("obtain the lease of %s: %v", node, err)
		}
		l := &coordinationv1.Lease{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: Namespace, Name: Name(node)}, l); err != nil {
			t.Fatalf("lease of %s: %v", node, err)
		}
	}
	if namespaces != 1 {
		t.Errorf("%d namespace creates for two leases, want 1 (the first, when it was missing)", namespaces)
	}
}

// Holder says who holds a node's lease and whether it is live; no lease is
// no holder.
func TestHolder(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	held := func(node, holder string, renewed time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: Name(node)}, Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To[int32](3600), RenewTime: &metav1.MicroTime{Time: renewed}}}
	}
	c := fake.NewClientBuilder().WithObjects(held("live", Holder, now.Add(-time.Minute)), held("expired", Holder, now.Add(-2*time.Hour))).Build()
	m := &Manager{Client: c, Now: func() time.Time { return now }}
	for _, tt := range []struct {
		node, holder string
		live         bool
	}{{"live", Holder, true}, {"expired", Holder, false}, {"none", "", false}} {
		holder, live, err := m.Holder(context.Background(), tt.node)
		if err != nil || holder != tt.holder || live != tt.live {
			t.Errorf("Holder(%s) = %q, %v, %v; want %q, %v", tt.node, holder, live, err, tt.holder, tt.live)
		}
	}
}

// ObtainFor names its owner on the lease: on the create, and on the renewal
// of a lease an earlier maintenance of the node owned (replacing that owner,
// keeping owners of other kinds) even when the renewal is not due yet.
func TestObtainForNamesTheOwner(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	c := fake.NewClientBuilder().Build()
	m := &Manager{Client: c, Now: func() time.Time { return now }}
	nm := func(name, uid string) *metav1.OwnerReference {
		return &metav1.OwnerReference{APIVersion: "nodemaintenance.medik8s.io/v1beta1", Kind: "NodeMaintenance", Name: name, UID: types.UID(uid)}
	}
	owners := func() []metav1.OwnerReference {
		l := &coordinationv1.Lease{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: Namespace, Name: Name("node01")}, l); err != nil {
			t.Fatal(err)
		}
		return l.OwnerReferences
	}
	if err := m.ObtainFor(context.Background(), "node01", nm("first", "u1")); err != nil {
		t.Fatal(err)
	}
	if got := owners(); len(got) != 1 || got[0].UID != "u1" {
		t.Fatalf("owners after the create: %+v; want the first maintenance", got)
	}
	l := &coordinationv1.Lease{}
	_ = c.Get(context.Background(), client.ObjectKey{Namespace: Namespace, Name: Name("node01")}, l)
	l.OwnerReferences = append(l.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "keep", UID: "c1"})
	if err := c.Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second) // renewal not due
	if err := m.ObtainFor(context.Background(), "node01", nm("second", "u2")); err != nil {
		t.Fatal(err)
	}
	got := owners()
	if len(got) != 2 || got[0].UID != "u2" || got[1].UID != "c1" {
		t.Fatalf("owners after the second maintenance took the lease: %+v; want it and the ConfigMap", got)
	}
}
