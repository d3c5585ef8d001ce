// Package drain decides which pods must leave a node under maintenance and
// evicts them through the Eviction API. It knows nothing about the reconciler:
// Plan classifies the pods it is given (from a cache), Evict makes one bounded
// round of eviction calls, and both return values the caller turns into status.
// The operator drains with it and the provider previews with it (Preview,
// package live), so it belongs to neither: it imports no controller-runtime
// and nothing of internal/operator or internal/provider.
//
// The rules follow `kubectl drain --ignore-daemonsets --delete-emptydir-data
// --force`, with kubectl's own PodFilter and PodDeleteStatus types:
//   - DaemonSet pods and mirror (static) pods stay: their controller would put
//     them right back, and the maintenance taints do not keep them off.
//   - Pods with emptyDir volumes are evicted (their scratch data is lost, as a
//     node in maintenance may be rebooted or replaced anyway).
//   - Pods without a controller are evicted: nothing recreates them elsewhere,
//     which is what the user asked for by putting the node into maintenance.
//   - Terminating pods are waited for, never evicted twice.
//   - Finished pods (Succeeded/Failed) are evicted: they hold nothing, and a
//     finished pod left on the node would keep the drain from ending.
//   - A pod created after the node was cordoned that tolerates the maintenance
//     taints chose to run on a node in maintenance (for example an operator
//     with `tolerations: [{operator: Exists}]`). Evicting it would only make its
//     controller put a replacement back, forever, so it is left alone like a
//     DaemonSet pod. Pods that were already there when the maintenance started
//     are evicted once whatever they tolerate.
//
// A NodeMaintenance's spec.drain narrows them: only the pods its podSelector
// matches leave, and Cluster API's drain label is honoured (skip: the pod
// stays; wait-completed: the pod is not evicted, the drain waits until it
// completes).
package drain

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	kubedrain "k8s.io/kubectl/pkg/drain"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// Reasons a pod is left on the node. Plan.SkippedSummary counts them for the
// event that starts a maintenance and the operator's drain-pass log.
const (
	SkipDaemonSet       = "DaemonSet pod"
	SkipMirror          = "mirror (static) pod"
	SkipToleratesDrain  = "created after the cordon and tolerates the maintenance taints"
	SkipNotSelected     = "not matched by spec.drain.podSelector"
	SkipDrainLabel      = "labelled " + nmv1beta1.DrainLabel + ": " + nmv1beta1.DrainLabelSkip
	SkipCompleted       = "completed (" + nmv1beta1.DrainLabel + ": " + nmv1beta1.DrainLabelWaitCompleted + ")"
	mirrorPodAnnotation = corev1.MirrorPodAnnotationKey

	// waitCompletedMessage marks the pods a drain waits for without evicting
	// them; it never reaches a user.
	waitCompletedMessage = "wait-completed"
)

// Plan is the classification of the pods bound to a node.
type Plan struct {
	// ToEvict are pods that must be evicted and are not terminating yet.
	ToEvict []corev1.Pod
	// Terminating are pods that must leave and are already on their way out.
	Terminating []corev1.Pod
	// Skipped are pods that stay on the node, with the reason.
	Skipped map[types.NamespacedName]string
	// Last are pods to evict only once no other pod has to leave (EvictLast):
	// the operator's own, so that a drain of the node it runs on is carried
	// to its end before it moves.
	Last []corev1.Pod
	// WaitCompleted are running pods labelled cluster.x-k8s.io/drain:
	// wait-completed: never evicted, waited for until they complete.
	WaitCompleted []corev1.Pod
}

// Pending are the pods that must still leave the node (or complete): to
// evict, to evict last, terminating, and waited for.
func (p Plan) Pending() []corev1.Pod {
	out := make([]corev1.Pod, 0, len(p.ToEvict)+len(p.Last)+len(p.Terminating)+len(p.WaitCompleted))
	out = append(out, p.ToEvict...)
	out = append(out, p.Last...)
	out = append(out, p.Terminating...)
	return append(out, p.WaitCompleted...)
}

// EvictLast moves the pods to evict for which last is true to Last.
func (p Plan) EvictLast(last func(*corev1.Pod) bool) Plan {
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
	if len(p.ToEvict) > 0 || len(p.Terminating) > 0 || len(p.WaitCompleted) > 0 {
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

// Filters returns the drain filters in kubectl's PodFilter form. cordonedAt is
// when the maintenance cordoned the node (zero: not yet). selected, when not
// nil, is spec.drain.podSelector: the pods it does not match stay.
func Filters(cordonedAt time.Time, maintenanceTaints []corev1.Taint, selected func(*corev1.Pod) bool) []kubedrain.PodFilter {
	filters := []kubedrain.PodFilter{daemonSetFilter, mirrorPodFilter}
	if selected != nil {
		filters = append(filters, func(pod corev1.Pod) kubedrain.PodDeleteStatus {
			if selected(&pod) {
				return kubedrain.MakePodDeleteStatusOkay()
			}
			return kubedrain.MakePodDeleteStatusWithWarning(false, SkipNotSelected)
		})
	}
	return append(filters, drainLabelFilter, tolerantLateComerFilter(cordonedAt, maintenanceTaints))
}

// drainLabelFilter applies Cluster API's drain label: skip stays; a running
// wait-completed pod is waited for (kept, marked for NewPlan), a completed
// one stays.
func drainLabelFilter(pod corev1.Pod) kubedrain.PodDeleteStatus {
	switch pod.Labels[nmv1beta1.DrainLabel] {
	case nmv1beta1.DrainLabelSkip:
		return kubedrain.MakePodDeleteStatusWithWarning(false, SkipDrainLabel)
	case nmv1beta1.DrainLabelWaitCompleted:
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			return kubedrain.MakePodDeleteStatusWithWarning(false, SkipCompleted)
		}
		return kubedrain.MakePodDeleteStatusWithWarning(true, waitCompletedMessage)
	}
	return kubedrain.MakePodDeleteStatusOkay()
}

// NewPlan classifies pods (all bound to one node).
func NewPlan(pods []corev1.Pod, filters []kubedrain.PodFilter) Plan {
	plan := Plan{Skipped: map[types.NamespacedName]string{}}
	for i := range pods {
		pod := pods[i]
		status, waitCompleted := kubedrain.MakePodDeleteStatusOkay(), false
		for _, f := range filters {
			if status = f(pod); !status.Delete {
				break
			}
			waitCompleted = waitCompleted || status.Message == waitCompletedMessage
		}
		switch {
		case !status.Delete:
			plan.Skipped[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}] = status.Message
		case pod.DeletionTimestamp != nil:
			plan.Terminating = append(plan.Terminating, pod)
		case waitCompleted:
			plan.WaitCompleted = append(plan.WaitCompleted, pod)
		default:
			plan.ToEvict = append(plan.ToEvict, pod)
		}
	}
	sortPods(plan.ToEvict)
	sortPods(plan.Terminating)
	sortPods(plan.WaitCompleted)
	return plan
}

func daemonSetFilter(pod corev1.Pod) kubedrain.PodDeleteStatus {
	if ref := metav1.GetControllerOf(&pod); ref != nil && ref.Kind == "DaemonSet" && strings.HasPrefix(ref.APIVersion, "apps/") &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		return kubedrain.MakePodDeleteStatusWithWarning(false, SkipDaemonSet)
	}
	return kubedrain.MakePodDeleteStatusOkay()
}

func mirrorPodFilter(pod corev1.Pod) kubedrain.PodDeleteStatus {
	if _, ok := pod.Annotations[mirrorPodAnnotation]; ok {
		return kubedrain.MakePodDeleteStatusWithWarning(false, SkipMirror)
	}
	return kubedrain.MakePodDeleteStatusOkay()
}

func tolerantLateComerFilter(cordonedAt time.Time, taints []corev1.Taint) kubedrain.PodFilter {
	return func(pod corev1.Pod) kubedrain.PodDeleteStatus {
		if cordonedAt.IsZero() || !pod.CreationTimestamp.Time.After(cordonedAt) {
			return kubedrain.MakePodDeleteStatusOkay()
		}
		for i := range taints {
			if !toleratesTaint(pod.Spec.Tolerations, &taints[i]) {
				return kubedrain.MakePodDeleteStatusOkay()
			}
		}
		return kubedrain.MakePodDeleteStatusWithWarning(false, SkipToleratesDrain)
	}
}

func toleratesTaint(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tolerations {
		if tolerations[i].ToleratesTaint(klog.Background(), taint, false) {
			return true
		}
	}
	return false
}

// Outcome of one eviction call.
type Outcome string

const (
	// Evicted: the API server accepted the eviction; the pod is terminating.
	Evicted Outcome = "evicted"
	// Gone: the pod no longer exists.
	Gone Outcome = "gone"
	// Blocked: a PodDisruptionBudget does not allow the disruption now (429).
	Blocked Outcome = "blocked"
	// Failed: any other error.
	Failed Outcome = "failed"
)

// EvictionResult is what happened to one pod.
type EvictionResult struct {
	Pod     types.NamespacedName
	UID     types.UID
	Outcome Outcome
	// Message says why the pod is blocked or failed, in the API server's words.
	Message string
	Err     error
}

// Evictor evicts one pod. Implementations make exactly one API call. grace,
// when set, overrides the pod's termination grace period (in seconds).
type Evictor interface {
	Evict(ctx context.Context, pod *corev1.Pod, grace *int64) error
}

// EvictorFunc adapts a function to Evictor.
type EvictorFunc func(ctx context.Context, pod *corev1.Pod, grace *int64) error

// Evict calls f.
func (f EvictorFunc) Evict(ctx context.Context, pod *corev1.Pod, grace *int64) error {
	return f(ctx, pod, grace)
}

// KubectlEvictor evicts through kubectl's drain helper (policy/v1 Eviction,
// the pod's own grace period unless grace is set, as `kubectl drain
// --grace-period`), so the API calls are the same as `kubectl drain`.
func KubectlEvictor(helper *kubedrain.Helper) Evictor {
	return EvictorFunc(func(ctx context.Context, pod *corev1.Pod, grace *int64) error {
		h := *helper
		h.Ctx = ctx
		if grace != nil {
			h.GracePeriodSeconds = int(*grace)
		}
		return h.EvictPod(*pod, policyv1.SchemeGroupVersion)
	})
}

// callTimeout bounds one eviction call.
const callTimeout = 15 * time.Second

// Evict makes one eviction call for each pod, at most parallel at a time,
// with the grace period override grace (nil: each pod's own), and returns
// the results sorted by pod. It never sleeps or retries: a
// blocked pod is data for the caller, which retries when the PDB allows.
//
// A call that has started is not cancelled with ctx (only bounded by
// callTimeout): an eviction cut off after the API server counted it against
// the PodDisruptionBudget but before it deleted the pod leaves the pod in the
// budget's disruptedPods for DisruptedPodTimeout (see InterruptedEviction),
// blocking the next eviction. Shutdown waits for the
// in-flight calls instead; calls not yet started are skipped.
func Evict(ctx context.Context, evictor Evictor, pods []corev1.Pod, parallel int, grace *int64) []EvictionResult {
	if parallel < 1 {
		parallel = 1
	}
	results := make([]EvictionResult, len(pods))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := range pods {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			pod := &pods[i]
			if err := ctx.Err(); err != nil {
				results[i] = classify(pod, err)
				return
			}
			callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
			defer cancel()
			results[i] = classify(pod, evictor.Evict(callCtx, pod, grace))
		}(i)
	}
	wg.Wait()
	sort.Slice(results, func(i, j int) bool { return lessName(results[i].Pod, results[j].Pod) })
	return results
}

func classify(pod *corev1.Pod, err error) EvictionResult {
	r := EvictionResult{Pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, UID: pod.UID}
	switch {
	case err == nil:
		r.Outcome = Evicted
	case apierrors.IsNotFound(err):
		r.Outcome = Gone
	case apierrors.IsTooManyRequests(err):
		r.Outcome, r.Message = Blocked, blockedMessage(err)
	default:
		r.Outcome, r.Err = Failed, fmt.Errorf("evict pod %s/%s: %w", pod.Namespace, pod.Name, err)
		r.Message = r.Err.Error()
	}
	return r
}

// blockedMessage extracts the PDB's own words ("The disruption budget web
// needs 5 healthy pods and has 5 currently") from a 429.
func blockedMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if d := status.Status().Details; d != nil {
			for _, c := range d.Causes {
				if c.Type == policyv1.DisruptionBudgetCause && c.Message != "" {
					return c.Message
				}
			}
		}
		if m := status.Status().Message; m != "" {
			return m
		}
	}
	return err.Error()
}

// DisruptedPodTimeout is how long kube-controller-manager's disruption
// controller keeps a pod in a budget's status.disruptedPods while the pod is
// not deleted (its DeletionTimeout): the longest an interrupted eviction
// holds the budget.
const DisruptedPodTimeout = 2 * time.Minute

// interruptedAfter is how old a budget's disruptedPods entry must be for a
// pod that is not terminating to count as interrupted: an eviction deletes
// the pod right after the budget counted it, and the cache shows the
// deletion within moments.
const interruptedAfter = 10 * time.Second

// InterruptedEviction is a pod a PodDisruptionBudget counts as disrupted
// although it is not terminating. The API server charges the budget first
// and deletes the pod next, with the eviction request's own context: a
// client killed, or a connection cut, between the two leaves the budget
// charged for a pod that keeps running, until the disruption controller
// drops the entry DisruptedPodTimeout later.
type InterruptedEviction struct {
	Budget, Pod types.NamespacedName
	Since       time.Time
}

func (e InterruptedEviction) String() string {
	return fmt.Sprintf("PodDisruptionBudget %s counts pod %s as disrupted since %s, but the pod is not terminating: "+
		"an eviction of it was cut off after the budget counted it and before the pod was deleted (its client was killed or lost its connection). "+
		"The budget allows one disruption fewer until kube-controller-manager drops that entry at %s, %s after it was made",
		e.Budget, e.Pod, e.Since.UTC().Format(time.RFC3339), e.Since.Add(DisruptedPodTimeout).UTC().Format(time.RFC3339), DisruptedPodTimeout)
}

// InterruptedEvictions lists the entries of the budgets' disruptedPods whose
// pod still runs (running reports a pod that exists and is not terminating)
// more than a few seconds after the budget counted it, sorted by budget and
// pod. Expired entries are left out: the disruption controller drops them.
func InterruptedEvictions(pdbs []policyv1.PodDisruptionBudget, running func(types.NamespacedName) bool, now time.Time) []InterruptedEviction {
	var out []InterruptedEviction
	for i := range pdbs {
		pdb := &pdbs[i]
		for name, since := range pdb.Status.DisruptedPods {
			age := now.Sub(since.Time)
			pod := types.NamespacedName{Namespace: pdb.Namespace, Name: name}
			if age < interruptedAfter || age > DisruptedPodTimeout || !running(pod) {
				continue
			}
			out = append(out, InterruptedEviction{Budget: types.NamespacedName{Namespace: pdb.Namespace, Name: pdb.Name}, Pod: pod, Since: since.Time})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Budget != out[j].Budget {
			return lessName(out[i].Budget, out[j].Budget)
		}
		return lessName(out[i].Pod, out[j].Pod)
	})
	return out
}

// sortPods sorts by namespace and name, keeping the order of equal names.
func sortPods(pods []corev1.Pod) {
	slices.SortStableFunc(pods, func(a, b corev1.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}

func lessName(a, b types.NamespacedName) bool {
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}
