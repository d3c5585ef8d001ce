package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// evictedRecently bounds how long a pod we evicted is trusted to be on its way
// out while the cache has not shown its deletionTimestamp yet.
const evictedRecently = 30 * time.Second

// progress is what one NodeMaintenance's reconciles remember between passes.
// Reconciles of one object never run concurrently, so only the map needs the lock.
type progress struct {
	// name is the NodeMaintenance's, for forgetName.
	name            string
	evicted         map[types.UID]time.Time
	blockedBackoff  time.Duration
	lastLeaseFailed time.Time
	// lastProgressWrite is when a pass last wrote the status of a drain in
	// progress or of a wait in the queue (statusInterval).
	lastProgressWrite time.Time
	// written is the object as this process last wrote it, and superseded
	// the resourceVersions its writes replaced since the cache last caught
	// up (newest).
	written    *nmv1beta1.NodeMaintenance
	superseded map[string]bool
	// notifiedBlockers are the blockers of the last blocked notification.
	notifiedBlockers []string
	// finalized: this process removed the finalizer (finalizedHere), and
	// released tells that it released the admission ledger's entry then.
	finalized, released bool
}

func (r *NodeMaintenanceReconciler) progressOf(nm *nmv1beta1.NodeMaintenance) *progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state == nil {
		r.state = map[types.UID]*progress{}
	}
	p, ok := r.state[nm.UID]
	if !ok {
		p = &progress{name: nm.Name, evicted: map[types.UID]time.Time{}}
		r.state[nm.UID] = p
	}
	return p
}

// wrote remembers nm as this process has just written it, over the
// resourceVersion replaced.
func (r *NodeMaintenanceReconciler) wrote(replaced string, nm *nmv1beta1.NodeMaintenance) {
	p := r.progressOf(nm)
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.superseded == nil {
		p.superseded = map[string]bool{}
	}
	p.superseded[replaced] = true
	p.written = nm.DeepCopy()
}

// newest returns this process's own latest write of nm when the cache still
// shows a version that write replaced, and nm otherwise. A pass started by
// an event that arrived before the cache saw our previous write would
// otherwise decide on the older object and lose its own write to a conflict
// (and the conflict's requeue): the common case while pods leave a node
// fast. Anyone else's write since ours still makes our next write conflict,
// as before.
func (r *NodeMaintenanceReconciler) newest(nm *nmv1beta1.NodeMaintenance) *nmv1beta1.NodeMaintenance {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.state[nm.UID]
	if !ok || p.written == nil {
		return nm
	}
	if p.superseded[nm.ResourceVersion] {
		return p.written.DeepCopy()
	}
	// The cache shows our write or a later one: it caught up.
	p.written, p.superseded = nil, nil
	return nm
}

func (r *NodeMaintenanceReconciler) forget(nm *nmv1beta1.NodeMaintenance) {
	r.mu.Lock()
	delete(r.state, nm.UID)
	r.mu.Unlock()
	r.queueMu.Lock()
	delete(r.granted, nm.UID)
	r.queueMu.Unlock()
}

// finalizedHere forgets what nm's passes remembered, but for the fact that
// this process finalized it (and released its admission, if released), until
// its object is gone (forgetName). A pass of nm that starts in between reads
// a cache that has not seen the finalizer's removal: it ends at once
// (wasFinalizedHere) instead of restoring again, and losing its writes to
// the object's deletion; and the pass of the object's deletion does not read
// the ledger live for an entry that is known to be released.
func (r *NodeMaintenanceReconciler) finalizedHere(nm *nmv1beta1.NodeMaintenance, released bool) {
	r.mu.Lock()
	if r.state == nil {
		r.state = map[types.UID]*progress{}
	}
	r.state[nm.UID] = &progress{name: nm.Name, finalized: true, released: released}
	r.mu.Unlock()
	r.queueMu.Lock()
	delete(r.granted, nm.UID)
	r.queueMu.Unlock()
}

// wasFinalizedHere reports whether this process finalized nm (finalizedHere).
func (r *NodeMaintenanceReconciler) wasFinalizedHere(nm *nmv1beta1.NodeMaintenance) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.state[nm.UID]
	return ok && p.finalized
}

// forgetEarlier forgets the finalized objects named as nm that are not nm:
// an object of that name was created again after one this process
// finalized, and the earlier one's gone event came in with its creation.
// Without it, releasedHere would answer for the new object. (One created and
// deleted again before any pass saw it still meets the earlier one's
// answer: its admission is not released, and its ledger entry lapses after
// ledger.TTL.)
func (r *NodeMaintenanceReconciler) forgetEarlier(nm *nmv1beta1.NodeMaintenance) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, p := range r.state {
		if p.finalized && p.name == nm.Name && uid != nm.UID {
			delete(r.state, uid)
		}
	}
}

// releasedHere reports whether this process released the admission of the
// NodeMaintenance name when it finalized it.
func (r *NodeMaintenanceReconciler) releasedHere(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.state {
		if p.name == name && p.finalized && p.released {
			return true
		}
	}
	return false
}

// forgetName forgets every NodeMaintenance named name that this process
// remembers: its object is gone without a finalize pass (it was deleted
// before it had a finalizer), so only its name is known.
func (r *NodeMaintenanceReconciler) forgetName(name string) {
	r.mu.Lock()
	var gone []types.UID
	for uid, p := range r.state {
		if p.name == name {
			gone = append(gone, uid)
			delete(r.state, uid)
		}
	}
	r.mu.Unlock()
	r.queueMu.Lock()
	for _, uid := range gone {
		delete(r.granted, uid)
	}
	r.queueMu.Unlock()
}

// evictedRecently reports the pods this process evicted moments ago (the
// ones notEvictedYet drops), for drain.Round.Evicting.
func (p *progress) evictedRecently(now time.Time) func(*corev1.Pod) bool {
	return func(pod *corev1.Pod) bool {
		at, ok := p.evicted[pod.UID]
		return ok && now.Sub(at) < evictedRecently
	}
}

// notEvictedYet drops pods this process evicted moments ago whose
// deletionTimestamp the cache has not shown yet, so no pod is evicted twice.
func (p *progress) notEvictedYet(pods []corev1.Pod, now time.Time) []corev1.Pod {
	out := pods[:0:0]
	recent := p.evictedRecently(now)
	for _, pod := range pods {
		if recent(&pod) {
			continue
		}
		out = append(out, pod)
	}
	for uid, at := range p.evicted {
		if now.Sub(at) >= evictedRecently {
			delete(p.evicted, uid)
		}
	}
	return out
}

// nextBlockedBackoff is the wait after one more round that a budget
// refused; the pass stores it (blockedBackoff) once its status is written.
func (p *progress) nextBlockedBackoff(o Options) time.Duration {
	if p.blockedBackoff == 0 {
		return o.BlockedBackoffInitial
	}
	return min(2*p.blockedBackoff, o.BlockedBackoffMax)
}
