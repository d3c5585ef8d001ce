package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// childName is the name of the NodeMaintenance of node in rollout:
// <rollout>-<node>, shortened with a hash when that is no valid name. It
// is the same in every pass, so that a child created by a pass that
// crashed before it could say so is found, never made twice.
func childName(rollout, node string) string {
	name := rollout + "-" + node
	if len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	return shortened(name, validation.DNS1123SubdomainMaxLength)
}

// jobName is the name of the step Job of node in rollout: a DNS label (the
// Job controller puts it in its pods' job-name label), shortened with a
// hash when needed.
func jobName(rollout, node string) string {
	name := rollout + "-" + node
	if len(validation.IsDNS1123Label(name)) == 0 {
		return name
	}
	return shortened(name, validation.DNS1123LabelMaxLength)
}

// shortened is name made a DNS label of at most limit characters: its
// beginning, dots made dashes, and a hash of all of it.
func shortened(name string, limit int) string {
	sum := sha256.Sum256([]byte(name))
	hash := hex.EncodeToString(sum[:])[:10]
	prefix := strings.ReplaceAll(strings.ToLower(name), ".", "-")
	if len(prefix) > limit-len(hash)-1 {
		prefix = prefix[:limit-len(hash)-1]
	}
	prefix = strings.Trim(prefix, "-")
	if prefix == "" {
		return hash
	}
	return prefix + "-" + hash
}

// newChild is the NodeMaintenance of one node of the rollout.
func (r *RolloutReconciler) newChild(ro *nmv1alpha1.NodeMaintenanceRollout, node string) (*nmv1beta1.NodeMaintenance, error) {
	reason := ro.Spec.Reason
	if reason == "" {
		reason = "rollout " + ro.Name
	}
	nm := &nmv1beta1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: childName(ro.Name, node), Labels: map[string]string{nmv1alpha1.RolloutLabel: ro.Name}},
		Spec:       nmv1beta1.NodeMaintenanceSpec{NodeName: node, Reason: reason, Drain: ro.Spec.Drain.DeepCopy()},
	}
	if err := controllerutil.SetControllerReference(ro, nm, r.Scheme); err != nil {
		return nil, fmt.Errorf("own NodeMaintenance %s by rollout %s: %w", nm.Name, ro.Name, err)
	}
	return nm, nil
}

// ensureChild gets or creates the child of a Draining row. A create the API
// server refuses (the webhook: the node's guards, --max-unavailable with
// the Refuse policy, someone else's maintenance created meanwhile) fails
// the node with the refusal; other errors are retried.
func (r *RolloutReconciler) ensureChild(ctx context.Context, s *scope, row nmv1alpha1.RolloutNode, o observed) error {
	if o.child != nil {
		r.created.forget(createdKey(o.child))
		return nil
	}
	nm, err := r.newChild(s.ro, row.Name)
	if err != nil {
		return err
	}
	err = r.create(ctx, nm)
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsForbidden(err), apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		s.refused(row.Name, fmt.Sprintf("the NodeMaintenance %s of node %s was refused: %v", nm.Name, row.Name, err))
		return nil
	}
	return fmt.Errorf("create NodeMaintenance %s for node %s of rollout %s: %w", nm.Name, row.Name, s.ro.Name, err)
}

// deleteObject deletes a child or Job of the rollout, if it is still there.
// One this process deleted moments ago is not deleted again: the pass
// after the one that deleted it (its own status write wakes it) often reads
// a cache that has not seen the deletion yet.
func (r *RolloutReconciler) deleteObject(ctx context.Context, obj client.Object) error {
	if obj == nil || !obj.GetDeletionTimestamp().IsZero() || r.deleted.recently(obj.GetUID(), r.now()) {
		return nil
	}
	err := r.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %T %s: %w", obj, client.ObjectKeyFromObject(obj), err)
	}
	r.deleted.add(obj.GetUID(), r.now())
	return nil
}

// writtenRecently is how long a create or a deletion this process made is
// trusted to be on its way while the cache does not show it.
const writtenRecently = 30 * time.Second

// recentWrites are the objects this process created or deleted in the
// last writtenRecently, by key.
type recentWrites[K comparable] struct {
	mu sync.Mutex
	at map[K]time.Time
}

// recently reports whether k was written within writtenRecently of now.
func (d *recentWrites[K]) recently(k K, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.at[k]
	return ok && now.Sub(at) < writtenRecently
}

// add remembers that k was written at now, and forgets the writes older
// than writtenRecently.
func (d *recentWrites[K]) add(k K, now time.Time) {
	var zero K
	if k == zero {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.at == nil {
		d.at = map[K]time.Time{}
	}
	for u, at := range d.at {
		if now.Sub(at) >= writtenRecently {
			delete(d.at, u)
		}
	}
	d.at[k] = now
}

// forget drops k: the cache shows the write.
func (d *recentWrites[K]) forget(k K) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.at, k)
}

// createdKey is the key of obj among the creates of this process: its Go
// type (a child or a step Job) and its namespace and name.
func createdKey(obj client.Object) string {
	return fmt.Sprintf("%T %s", obj, client.ObjectKeyFromObject(obj))
}

// create creates obj, a child or a step Job, unless this process created
// it moments ago and the cache does not show it yet: the pass after the
// one that created it (its own status write wakes it) often reads a cache
// that has not seen the create, and a second create only comes back
// AlreadyExists, through the admission webhook for a child. It returns the
// create's error, AlreadyExists included.
func (r *RolloutReconciler) create(ctx context.Context, obj client.Object) error {
	key := createdKey(obj)
	if r.created.recently(key, r.now()) {
		return nil
	}
	err := r.Client.Create(ctx, obj)
	if err == nil || apierrors.IsAlreadyExists(err) {
		r.created.add(key, r.now())
	}
	return err
}
