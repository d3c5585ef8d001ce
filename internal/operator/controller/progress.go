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
	evicted         map[types.UID]time.Time
	blockedBackoff  time.Duration
	lastLeaseFailed time.Time
}

func (r *NodeMaintenanceReconciler) progressOf(nm *nmv1beta1.NodeMaintenance) *progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state == nil {
		r.state = map[types.UID]*progress{}
	}
	p, ok := r.state[nm.UID]
	if !ok {
		p = &progress{evicted: map[types.UID]time.Time{}}
		r.state[nm.UID] = p
	}
	return p
}

func (r *NodeMaintenanceReconciler) forget(nm *nmv1beta1.NodeMaintenance) {
	r.mu.Lock()
	delete(r.state, nm.UID)
	r.mu.Unlock()
	r.queueMu.Lock()
	delete(r.granted, nm.UID)
	r.queueMu.Unlock()
}

// notEvictedYet drops pods this process evicted moments ago whose
// deletionTimestamp the cache has not shown yet, so no pod is evicted twice.
func (p *progress) notEvictedYet(pods []corev1.Pod, now time.Time) []corev1.Pod {
	out := pods[:0:0]
	for _, pod := range pods {
		if at, ok := p.evicted[pod.UID]; ok && now.Sub(at) < evictedRecently {
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

func (p *progress) nextBlockedBackoff(o Options) time.Duration {
	if p.blockedBackoff == 0 {
		p.blockedBackoff = o.BlockedBackoffInitial
	} else {
		p.blockedBackoff = min(2*p.blockedBackoff, o.BlockedBackoffMax)
	}
	return p.blockedBackoff
}
