package drain

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubedrain "k8s.io/kubectl/pkg/drain"
)

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

func lessName(a, b types.NamespacedName) bool {
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}
