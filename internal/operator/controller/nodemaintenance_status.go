package controller

import (
	"fmt"
	"math/bits"
	"reflect"
	"sort"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/drain"
)

// maxErrorsInStatus bounds lastError when many pods are blocked at once.
const maxErrorsInStatus = 3

// drainProgress is the percentage of the pods to evict that are gone,
// clamped to 0..100 (pods can arrive after the count was taken).
func drainProgress(evictionPods, pending int) int {
	if evictionPods <= 0 {
		if pending == 0 {
			return 100
		}
		return 0
	}
	switch {
	case pending <= 0:
		return 100
	case pending >= evictionPods:
		return 0
	}
	// evictionPods comes back from the stored status and can be any int:
	// (evictionPods-pending)*100 would overflow, so multiply in 128 bits.
	// The quotient is below 100, as evictionPods-pending < evictionPods.
	hi, lo := bits.Mul64(uint64(evictionPods-pending), 100)
	p, _ := bits.Div64(hi, lo, uint64(evictionPods))
	return int(p)
}

// pendingAfter is every pod of the plan still on the node after this pass:
// the terminating ones, those just evicted (terminating now) and those
// blocked or failed. Pods the API reported gone are not pending.
func pendingAfter(plan drain.Plan, results []drain.EvictionResult) []corev1.Pod {
	gone := map[string]bool{}
	for _, r := range results {
		if r.Outcome == drain.Gone {
			gone[r.Pod.String()] = true
		}
	}
	var out []corev1.Pod
	for _, p := range plan.Pending() {
		if !gone[p.Namespace+"/"+p.Name] {
			out = append(out, p)
		}
	}
	return out
}

// setPending writes the pending pods into status, sorted by namespace and
// name so that the status does not flap between passes.
func setPending(status *nmv1beta1.NodeMaintenanceStatus, pods []corev1.Pod) {
	refs := make([]nmv1beta1.PodReference, 0, len(pods))
	for _, p := range pods {
		refs = append(refs, nmv1beta1.PodReference{Namespace: p.Namespace, Name: p.Name})
	}
	sortRefs(refs)
	names := make([]string, 0, len(refs))
	for _, r := range refs {
		names = append(names, r.Name)
	}
	status.PendingPods, status.PendingPodsRefs = nil, nil
	if len(refs) > 0 {
		status.PendingPods, status.PendingPodsRefs = names, refs
	}
}

func sortRefs(refs []nmv1beta1.PodReference) {
	sort.Slice(refs, func(i, j int) bool {
		if refs[i].Namespace != refs[j].Namespace {
			return refs[i].Namespace < refs[j].Namespace
		}
		return refs[i].Name < refs[j].Name
	})
}

// summarize joins the first problems into lastError, saying how many more.
func summarize(problems []string) string {
	if len(problems) <= maxErrorsInStatus {
		return strings.Join(problems, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(problems[:maxErrorsInStatus], "; "), len(problems)-maxErrorsInStatus)
}

// maxLastErrorBytes bounds lastError in bytes: three eviction refusals from
// the API server fit many times over, and a message that does not (a long
// webhook or admission answer) cannot make the status large.
const maxLastErrorBytes = 4096

// boundedError cuts msg to maxLastErrorBytes, on a UTF-8 boundary, and says
// that it did.
func boundedError(msg string) string {
	if len(msg) <= maxLastErrorBytes {
		return msg
	}
	const cut = " ... (truncated)"
	end := maxLastErrorBytes - len(cut)
	for end > 0 && !utf8.RuneStart(msg[end]) {
		end--
	}
	return msg[:end] + cut
}

func equalStatus(a, b *nmv1beta1.NodeMaintenanceStatus) bool {
	return reflect.DeepEqual(a, b)
}
