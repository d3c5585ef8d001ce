package controller

import (
	"cmp"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
)

// The fuzz targets here check the status a drain pass writes against oracles
// that do not share its code (exact big.Int arithmetic, struct-keyed sets).
// Seeds live in testdata/fuzz/<target>/ and in f.Add.

// exactProgress is floor((evictionPods-pending)*100/evictionPods) for
// 0 <= pending <= evictionPods, evictionPods > 0, without overflow.
func exactProgress(evictionPods, pending int) int {
	done := new(big.Int).Sub(big.NewInt(int64(evictionPods)), big.NewInt(int64(pending)))
	done.Mul(done, big.NewInt(100))
	return int(done.Quo(done, big.NewInt(int64(evictionPods))).Int64())
}

func FuzzDrainProgressMatchesCounts(f *testing.F) {
	for _, c := range [][2]int{
		{0, 0}, {0, 2}, {4, 4}, {4, 3}, {3, 1}, {4, 0}, {4, 6}, {1000, 1}, {-1, 0}, {-1, 7}, {5, -1},
		{math.MaxInt, 0}, {math.MaxInt, 1}, {math.MaxInt, math.MaxInt - 1}, {math.MaxInt / 100, 1},
		{math.MaxInt/100 + 1, 1}, {math.MinInt, 0}, {math.MinInt, math.MinInt}, {3, math.MinInt}, {math.MaxInt, -1},
	} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, evictionPods, pending int) {
		got := drainProgress(evictionPods, pending)
		if got < 0 || got > 100 {
			t.Fatalf("drainProgress(%d, %d) = %d, outside 0..100", evictionPods, pending, got)
		}
		if pending < 0 {
			return // a length: only the range matters for impossible input
		}
		// The reconciler marks the maintenance succeeded at 100: it must
		// mean nothing is pending, whatever count the status kept.
		if (got == 100) != (pending == 0) {
			t.Fatalf("drainProgress(%d, %d) = %d: 100 must mean no pod is pending", evictionPods, pending, got)
		}
		if evictionPods <= 0 {
			return
		}
		want := 0
		if pending <= evictionPods {
			want = exactProgress(evictionPods, pending)
		}
		if got != want {
			t.Fatalf("drainProgress(%d, %d) = %d, want %d (the share of the pods to evict that are gone, rounded down)", evictionPods, pending, got, want)
		}
		// A pod more pending never raises progress; a pod more counted at
		// the start (with as many pending) never lowers it.
		if pending < math.MaxInt {
			if next := drainProgress(evictionPods, pending+1); next > got {
				t.Fatalf("drainProgress(%d, %d) = %d > drainProgress(%d, %d) = %d", evictionPods, pending+1, next, evictionPods, pending, got)
			}
		}
		if evictionPods < math.MaxInt {
			if next := drainProgress(evictionPods+1, pending); next < got {
				t.Fatalf("drainProgress(%d, %d) = %d < drainProgress(%d, %d) = %d", evictionPods+1, pending, next, evictionPods, pending, got)
			}
		}
	})
}

// podsForFuzz turns "ns/name,ns/name,..." into pods with distinct
// namespace/name, as a List from the cache returns them. Neither part can
// contain a '/' in Kubernetes (both are DNS names), so a second '/' is folded
// into the name as '-'.
func podsForFuzz(spec string) []corev1.Pod {
	if spec == "" {
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	var pods []corev1.Pod
	for _, token := range strings.Split(spec, ",") {
		ns, name, ok := strings.Cut(token, "/")
		if !ok {
			ns, name = "default", token
		}
		key := types.NamespacedName{Namespace: ns, Name: strings.ReplaceAll(name, "/", "-")}
		if seen[key] {
			continue
		}
		seen[key] = true
		pods = append(pods, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: types.UID(fmt.Sprint("uid-", len(pods)))}})
	}
	return pods
}

func podKey(p corev1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
}

var outcomeForFuzz = []drain.Outcome{"", drain.Evicted, drain.Gone, drain.Blocked, drain.Failed}

// FuzzDrainPassStatus builds a drain plan and the results of one eviction
// round, then runs what the reconciler does with them (pendingAfter,
// setPending, drainProgress) and checks the status it would write:
//   - pending is exactly the plan's pods without a Gone result, in plan order,
//     each once, never more than the plan holds; a Gone result for a pod that
//     is not in the plan removes nothing;
//   - pendingPods and pendingPodsRefs have one entry per pending pod, sorted by
//     namespace then name, names matching, both nil when nothing is pending
//     (so omitempty and DeepEqual agree and the status does not flap), the
//     stale lists of the previous pass replaced and no other field touched;
//   - the order of the pods never changes the status;
//   - drainProgress is 100 exactly when nothing is pending and otherwise the
//     share of the counted pods that are gone, rounded down.
//
// podSpec lists the pods ("ns/name,..."); outcomes[i] says for pod i whether
// it is terminating (bit 0) and its eviction outcome (bits 1-3: none,
// evicted, gone, blocked, failed); strayGone lists pods reported gone that are
// not in the plan; evictionPods is the count a previous pass stored.
func FuzzDrainPassStatus(f *testing.F) {
	f.Add("", []byte{}, "", 0)
	f.Add("n/a,n/b", []byte{2 << 1, 1 << 1}, "", 2)
	f.Add("n/a,n/b,n/c,m/a", []byte{1, 3 << 1, 4 << 1, 2<<1 | 1}, "n/z", 4)
	f.Add("b/x,a/z,a/y", []byte{0, 0, 0}, "", 3)
	f.Add("n/a,n/a,n/b", []byte{2 << 1, 0, 2 << 1}, "n/b,x/y", 10)
	f.Add("a/b/c,a/b-c,a,/,,", []byte{2 << 1, 1, 3 << 1, 4 << 1}, "a/b/c", -1)
	f.Add("Ä/ö,ä/Ö,\xff/\xfe", []byte{4 << 1, 2 << 1}, "", math.MaxInt)
	f.Fuzz(func(t *testing.T, podSpec string, outcomes []byte, strayGone string, evictionPods int) {
		pods := podsForFuzz(podSpec)
		var plan drain.Plan
		var results []drain.EvictionResult
		gone := map[types.NamespacedName]bool{}
		for i, p := range pods {
			var b byte
			if i < len(outcomes) {
				b = outcomes[i]
			}
			if b&1 == 1 {
				plan.Terminating = append(plan.Terminating, p)
			} else {
				plan.ToEvict = append(plan.ToEvict, p)
			}
			if o := int(b >> 1 & 7); o < len(outcomeForFuzz) && outcomeForFuzz[o] != "" {
				results = append(results, drain.EvictionResult{Pod: podKey(p), UID: p.UID, Outcome: outcomeForFuzz[o]})
				gone[podKey(p)] = gone[podKey(p)] || outcomeForFuzz[o] == drain.Gone
			}
		}
		for _, p := range podsForFuzz(strayGone) {
			results = append(results, drain.EvictionResult{Pod: podKey(p), Outcome: drain.Gone})
			gone[podKey(p)] = true
		}
		planCopy := drain.Plan{ToEvict: slices.Clone(plan.ToEvict), Terminating: slices.Clone(plan.Terminating)}
		resultsCopy := slices.Clone(results)

		pending := drain.NewRound(plan, results).Pending
		var want []corev1.Pod
		for _, p := range plan.Pending() {
			if !gone[podKey(p)] {
				want = append(want, p)
			}
		}
		slices.SortStableFunc(want, func(a, b corev1.Pod) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
		})
		if !reflect.DeepEqual(pending, want) {
			t.Fatalf("round.Pending = %v, want the plan's pods without a Gone result, sorted: %v", keysOf(pending), keysOf(want))
		}
		if len(pending) > len(plan.Pending()) {
			t.Fatalf("%d pending, more than the %d pods of the plan", len(pending), len(plan.Pending()))
		}
		if !reflect.DeepEqual(plan, planCopy) || !reflect.DeepEqual(results, resultsCopy) {
			t.Fatalf("NewRound changed its arguments")
		}

		prior := nmv1beta1.NodeMaintenanceStatus{
			Phase: nmv1beta1.MaintenanceRunning, DrainProgress: 42, LastError: "e", TotalPods: 7, EvictionPods: evictionPods,
			PendingPods: []string{"stale"}, PendingPodsRefs: []nmv1beta1.PodReference{{Namespace: "old", Name: "stale"}},
		}
		status := *prior.DeepCopy()
		setPending(&status, pending)
		assertPendingStatus(t, &status, pending)
		status.PendingPods, status.PendingPodsRefs = prior.PendingPods, prior.PendingPodsRefs
		if !equalStatus(&status, &prior) {
			t.Fatalf("setPending changed more than the pending lists: %+v", status)
		}

		// Whatever order the cache lists the pods in, the status is the same.
		for _, reorder := range []func([]corev1.Pod) []corev1.Pod{reversed, rotated} {
			a, b := prior.DeepCopy(), prior.DeepCopy()
			setPending(a, pending)
			setPending(b, reorder(slices.Clone(pending)))
			if !equalStatus(a, b) {
				t.Fatalf("status depends on the order of the pods: %v vs %v", a.PendingPodsRefs, b.PendingPodsRefs)
			}
		}

		// The count taken when the drain started is the plan's pending pods.
		counted := len(plan.Pending())
		progress := drainProgress(counted, len(pending))
		if (progress == 100) != (len(pending) == 0) {
			t.Fatalf("drainProgress(%d, %d) = %d: 100 must mean no pod is pending", counted, len(pending), progress)
		}
		if counted > 0 {
			if goneInPlan := counted - len(pending); progress != goneInPlan*100/counted {
				t.Fatalf("drainProgress(%d, %d) = %d, want %d: %d of %d pods gone", counted, len(pending), progress, goneInPlan*100/counted, goneInPlan, counted)
			}
		}
		// A count kept in the status from an earlier pass may be anything.
		if stored := drainProgress(evictionPods, len(pending)); stored < 0 || stored > 100 || (stored == 100) != (len(pending) == 0) {
			t.Fatalf("drainProgress(%d, %d) = %d: outside 0..100 or 100 with pods pending", evictionPods, len(pending), stored)
		}
	})
}

func assertPendingStatus(t *testing.T, status *nmv1beta1.NodeMaintenanceStatus, pending []corev1.Pod) {
	t.Helper()
	if len(pending) == 0 {
		if status.PendingPods != nil || status.PendingPodsRefs != nil {
			t.Fatalf("nothing pending, but the lists are %#v / %#v, not nil", status.PendingPods, status.PendingPodsRefs)
		}
		return
	}
	refs := status.PendingPodsRefs
	if len(refs) != len(pending) || len(status.PendingPods) != len(pending) {
		t.Fatalf("%d pods pending, %d pendingPodsRefs, %d pendingPods", len(pending), len(refs), len(status.PendingPods))
	}
	want := map[nmv1beta1.PodReference]bool{}
	for _, p := range pending {
		want[nmv1beta1.PodReference{Namespace: p.Namespace, Name: p.Name}] = true
	}
	for i, r := range refs {
		if !want[r] {
			t.Fatalf("pendingPodsRefs[%d] = %v, not a pending pod (or listed twice)", i, r)
		}
		delete(want, r)
		if status.PendingPods[i] != r.Name {
			t.Fatalf("pendingPods[%d] = %q, but pendingPodsRefs[%d] is %v", i, status.PendingPods[i], i, r)
		}
		if i > 0 {
			prev := refs[i-1]
			if prev.Namespace > r.Namespace || prev.Namespace == r.Namespace && prev.Name >= r.Name {
				t.Fatalf("pendingPodsRefs not strictly sorted by namespace, name: %v before %v", prev, r)
			}
		}
	}
}

func keysOf(pods []corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, strconv.Quote(p.Namespace)+"/"+strconv.Quote(p.Name))
	}
	return out
}

func reversed(pods []corev1.Pod) []corev1.Pod {
	slices.Reverse(pods)
	return pods
}

func rotated(pods []corev1.Pod) []corev1.Pod {
	if len(pods) < 2 {
		return pods
	}
	return append(pods[1:], pods[0])
}
