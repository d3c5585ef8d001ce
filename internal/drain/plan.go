package drain

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Plan is the classification of the pods bound to a node.
type Plan struct {
	// ToEvict are pods that must be evicted and are not terminating yet.
	ToEvict []corev1.Pod
	// Terminating are pods that must leave and are already on their way out.
	Terminating []corev1.Pod
	// Skipped are pods that stay on the node, with the reason.
	Skipped map[types.NamespacedName]string
	// Last are pods to evict only once no other pod has to leave (Rules.EvictLast):
	// the operator's own, so that a drain of the node it runs on is carried
	// to its end before it moves.
	Last []corev1.Pod
	// WaitCompleted are running pods labelled cluster.x-k8s.io/drain:
	// wait-completed: never evicted, waited for until they complete.
	WaitCompleted []corev1.Pod
	// LocalData are running pods with emptyDir volumes under
	// spec.drain.deleteEmptyDirData false: never evicted, waited for until
	// someone deletes them (Round.Problems says so).
	LocalData []corev1.Pod
}

// Pending are the pods that must still leave the node (or complete): to
// evict, to evict last, terminating, and waited for.
func (p Plan) Pending() []corev1.Pod {
	out := make([]corev1.Pod, 0, len(p.ToEvict)+len(p.Last)+len(p.Terminating)+len(p.WaitCompleted)+len(p.LocalData))
	out = append(out, p.ToEvict...)
	out = append(out, p.Last...)
	out = append(out, p.Terminating...)
	out = append(out, p.WaitCompleted...)
	return append(out, p.LocalData...)
}

// evictLast moves the pods to evict for which last is true to Last.
func (p Plan) evictLast(last func(*corev1.Pod) bool) Plan {
	kept := p.ToEvict[:0:0]
	for i := range p.ToEvict {
		if last(&p.ToEvict[i]) {
			p.Last = append(p.Last, p.ToEvict[i])
		} else {
			kept = append(kept, p.ToEvict[i])
		}
	}
	p.ToEvict = kept
	return p
}

// Evictable are the pods a round may evict now: those to evict, or, once
// none is left and none is terminating, the Last ones.
func (p Plan) Evictable() []corev1.Pod {
	if len(p.ToEvict) > 0 || len(p.Terminating) > 0 || len(p.WaitCompleted) > 0 || len(p.LocalData) > 0 {
		return p.ToEvict
	}
	return p.Last
}

// OwnedByDeployment reports whether a pod is a replica of the Deployment
// namespace/name, from its controller reference: a ReplicaSet named
// name-<pod-template-hash>.
func OwnedByDeployment(namespace, name string) func(*corev1.Pod) bool {
	return func(pod *corev1.Pod) bool {
		ref := metav1.GetControllerOf(pod)
		if pod.Namespace != namespace || ref == nil || ref.Kind != "ReplicaSet" {
			return false
		}
		hash, ok := strings.CutPrefix(ref.Name, name+"-")
		return ok && hash != "" && !strings.Contains(hash, "-")
	}
}

// SkippedSummary counts the pods that stay on the node by reason, sorted by
// reason: "DaemonSet pod (2), mirror (static) pod (1)". It is empty when no
// pod stays.
func (p Plan) SkippedSummary() string {
	counts := map[string]int{}
	for _, reason := range p.Skipped {
		counts[reason]++
	}
	reasons := make([]string, 0, len(counts))
	for reason := range counts {
		reasons = append(reasons, reason)
	}
	sort.Strings(reasons)
	parts := make([]string, 0, len(reasons))
	for _, reason := range reasons {
		parts = append(parts, fmt.Sprintf("%s (%d)", reason, counts[reason]))
	}
	return strings.Join(parts, ", ")
}

// sortPods sorts by namespace and name, keeping the order of equal names.
func sortPods(pods []corev1.Pod) {
	slices.SortStableFunc(pods, func(a, b corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}
