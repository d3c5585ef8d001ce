// Package lease holds the coordination.k8s.io Lease that marks a node as being
// in maintenance, in the form the medik8s operators share: a Lease named
// node-<nodeName> in namespace medik8s-leases, holder node-maintenance. Other
// medik8s components (remediation) see the lease and leave the node alone.
package lease

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// Namespace holds the node leases of the medik8s operators.
	Namespace = "medik8s-leases"
	// Holder is the holder identity of the node-maintenance operator.
	Holder = "node-maintenance"
	// DefaultDuration is the lease duration the medik8s node-maintenance-operator uses.
	DefaultDuration = time.Hour
)

// namePrefix starts the name of every node lease.
const namePrefix = "node-"

// Name is the name of the lease of a node.
func Name(nodeName string) string { return namePrefix + nodeName }

// NodeName is the inverse of Name: the node a lease in Namespace is for, or
// false when the name is not a node lease's.
func NodeName(leaseName string) (string, bool) {
	node, ok := strings.CutPrefix(leaseName, namePrefix)
	return node, ok && node != ""
}

// HeldError says another holder has a valid lease on the node.
type HeldError struct {
	Node    string
	Holder  string
	Expires time.Time
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("the lease %s/%s on node %s is held by %q until %s; the maintenance waits for it to be released or to expire",
		Namespace, Name(e.Node), e.Node, e.Holder, e.Expires.UTC().Format(time.RFC3339))
}

// Manager obtains, renews and releases node leases.
type Manager struct {
	// Client writes leases (and creates the namespace).
	Client client.Client
	// Reader reads leases; a cache keeps renewals cheap. Defaults to Client.
	Reader client.Reader
	// Duration of the lease; it is renewed when a third of it has passed.
	Duration time.Duration
	// Now is the clock, for tests.
	Now func() time.Time
}

func (m *Manager) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Manager) duration() time.Duration {
	if m.Duration <= 0 {
		return DefaultDuration
	}
	return m.Duration
}

// RenewInterval is how often a held lease is renewed.
func (m *Manager) RenewInterval() time.Duration { return m.duration() / 3 }

func (m *Manager) reader() client.Reader {
	if m.Reader != nil {
		return m.Reader
	}
	return m.Client
}

// Obtain takes the node's lease, or renews it when we hold it and a third of
// its duration has passed. A lease held by someone else is a *HeldError until it
// expires; an expired lease is taken over.
func (m *Manager) Obtain(ctx context.Context, nodeName string) error {
	return m.ObtainFor(ctx, nodeName, nil)
}

// ObtainFor is Obtain on behalf of owner, which the lease names as its
// owner, so that the garbage collector deletes a lease whose owner is gone:
// a NodeMaintenance deleted before it could finalize (its finalizer is
// written after its lease is taken). owner replaces an earlier owner of its
// kind (a NodeMaintenance of the node before this one). It is not a
// controller reference: the lease stays the shared medik8s one, which any
// holder may take over once it expires.
func (m *Manager) ObtainFor(ctx context.Context, nodeName string, owner *metav1.OwnerReference) error {
	l := &coordinationv1.Lease{}
	err := m.reader().Get(ctx, client.ObjectKey{Namespace: Namespace, Name: Name(nodeName)}, l)
	if apierrors.IsNotFound(err) {
		return m.create(ctx, nodeName, owner)
	}
	if err != nil {
		return fmt.Errorf("read lease %s/%s: %w", Namespace, Name(nodeName), err)
	}
	now := m.now()
	holder := ptr.Deref(l.Spec.HolderIdentity, "")
	expires := expiry(l)
	if holder != Holder && holder != "" && now.Before(expires) {
		return &HeldError{Node: nodeName, Holder: holder, Expires: expires}
	}
	if holder == Holder && l.Spec.RenewTime != nil && now.Sub(l.Spec.RenewTime.Time) < m.RenewInterval() &&
		ptr.Deref(l.Spec.LeaseDurationSeconds, 0) == int32(m.duration().Seconds()) && ownedBy(l, owner) {
		return nil
	}
	updated := l.DeepCopy()
	mt := metav1.NewMicroTime(now)
	if holder != Holder {
		updated.Spec.AcquireTime = &mt
		updated.Spec.LeaseTransitions = ptr.To(ptr.Deref(l.Spec.LeaseTransitions, 0) + 1)
	}
	updated.Spec.HolderIdentity = ptr.To(Holder)
	updated.Spec.LeaseDurationSeconds = ptr.To(int32(m.duration().Seconds()))
	updated.Spec.RenewTime = &mt
	updated.OwnerReferences = withOwner(l.OwnerReferences, owner)
	// The resourceVersion in the update makes a concurrent take-over a Conflict
	// instead of a silent overwrite.
	if err := m.Client.Update(ctx, updated); err != nil {
		return fmt.Errorf("renew lease %s/%s: %w", Namespace, Name(nodeName), err)
	}
	return nil
}

// ownedBy reports whether l names owner (nil: any owner will do).
func ownedBy(l *coordinationv1.Lease, owner *metav1.OwnerReference) bool {
	return owner == nil || slices.ContainsFunc(l.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == owner.UID })
}

// withOwner is refs with owner in place of any reference of its kind.
func withOwner(refs []metav1.OwnerReference, owner *metav1.OwnerReference) []metav1.OwnerReference {
	if owner == nil {
		return refs
	}
	out := []metav1.OwnerReference{*owner}
	for _, o := range refs {
		if o.Kind != owner.Kind || o.APIVersion != owner.APIVersion {
			out = append(out, o)
		}
	}
	return out
}

// create creates the node's lease, held by us. Its namespace is created
// only when the API server says it is missing (the first lease of a
// cluster), not on every create.
func (m *Manager) create(ctx context.Context, nodeName string, owner *metav1.OwnerReference) error {
	now := metav1.NewMicroTime(m.now())
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: Name(nodeName), OwnerReferences: withOwner(nil, owner)},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(Holder),
			LeaseDurationSeconds: ptr.To(int32(m.duration().Seconds())),
			AcquireTime:          &now,
			RenewTime:            &now,
			LeaseTransitions:     ptr.To[int32](0),
		},
	}
	err := m.Client.Create(ctx, l.DeepCopy())
	if apierrors.IsNotFound(err) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
		if err := m.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s for the node leases: %w", Namespace, err)
		}
		err = m.Client.Create(ctx, l)
	}
	if err != nil {
		return fmt.Errorf("create lease %s/%s: %w", Namespace, Name(nodeName), err)
	}
	return nil
}

// Release deletes the node's lease if we hold it. A lease held by someone
// else is theirs and is left alone.
func (m *Manager) Release(ctx context.Context, nodeName string) error {
	l := &coordinationv1.Lease{}
	err := m.Client.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: Name(nodeName)}, l)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read lease %s/%s: %w", Namespace, Name(nodeName), err)
	}
	if ptr.Deref(l.Spec.HolderIdentity, "") != Holder {
		return nil
	}
	err = m.Client.Delete(ctx, l, client.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("release lease %s/%s: %w", Namespace, Name(nodeName), err)
	}
	return nil
}

// Holder reads the node's lease: its holder identity ("" when there is no
// lease) and whether it is live (not expired).
func (m *Manager) Holder(ctx context.Context, nodeName string) (holder string, live bool, err error) {
	l := &coordinationv1.Lease{}
	err = m.reader().Get(ctx, client.ObjectKey{Namespace: Namespace, Name: Name(nodeName)}, l)
	if apierrors.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read lease %s/%s: %w", Namespace, Name(nodeName), err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, ""), m.now().Before(expiry(l)), nil
}

func expiry(l *coordinationv1.Lease) time.Time {
	var base time.Time
	switch {
	case l.Spec.RenewTime != nil:
		base = l.Spec.RenewTime.Time
	case l.Spec.AcquireTime != nil:
		base = l.Spec.AcquireTime.Time
	default:
		return time.Time{}
	}
	return base.Add(time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second)
}
