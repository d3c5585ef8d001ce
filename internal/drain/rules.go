package drain

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	kubedrain "k8s.io/kubectl/pkg/drain"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
)

// Reasons a pod is left on the node. Plan.SkippedSummary counts them for the
// event that starts a maintenance and the operator's drain-pass log; the
// preview lists them per pod.
const (
	SkipDaemonSet      = "DaemonSet pod"
	SkipMirror         = "mirror (static) pod"
	SkipToleratesDrain = "created after the cordon and tolerates the maintenance taints"
	SkipNotSelected    = "not matched by spec.drain.podSelector"
	SkipDrainLabel     = "labelled " + nmv1beta1.DrainLabel + ": " + nmv1beta1.DrainLabelSkip
	SkipCompleted      = "completed (" + nmv1beta1.DrainLabel + ": " + nmv1beta1.DrainLabelWaitCompleted + ")"

	// waitCompletedMessage and localDataMessage mark the pods a drain waits
	// for without evicting them; they never reach a user.
	waitCompletedMessage = "wait-completed"
	localDataMessage     = "local-data"
)

// SkipDeletedOnDeadNode is the reason a terminating pod counts as gone
// under spec.drain.skipWaitForDeleteTimeout (timeout).
func SkipDeletedOnDeadNode(timeout time.Duration) string {
	return fmt.Sprintf("deleted more than %s ago on a node that is not Ready (spec.drain.skipWaitForDeleteTimeout)", timeout)
}

// Rules are everything that decides what a drain does with each pod of a
// node: spec.drain, the node, when the node was cordoned and the clock. The
// operator's drain pass and the preview build them from the same inputs and
// call NewPlan with them, so the two cannot disagree; a new rule goes here
// (and a pod field it reads into PodFields).
type Rules struct {
	// Policy is spec.drain; nil is the default drain.
	Policy *nmv1beta1.DrainPolicy
	// Node is the node being drained. skipWaitForDeleteTimeout applies only
	// while it is not Ready; nil is a node taken to be Ready.
	Node *corev1.Node
	// CordonedAt is when the maintenance cordoned the node; zero: not yet.
	// The preview takes the cordon to happen Now.
	CordonedAt time.Time
	// Now is the clock of the decision (skipWaitForDeleteTimeout).
	Now time.Time
	// EvictLast, when set, picks the pods to evict only once every other
	// pod has left (Plan.Last): the operator's own.
	EvictLast func(*corev1.Pod) bool
}

// Grace is the termination grace period the drain gives an evicted (or, on
// timeout, deleted) pod: spec.drain.gracePeriodSeconds, or nil for each
// pod's own.
func (r Rules) Grace() *int64 {
	if r.Policy == nil {
		return nil
	}
	return r.Policy.GracePeriodSeconds
}

// NewPlan classifies pods (all bound to Rules.Node) under the rules. The
// only error is a spec.drain.podSelector that is not a label selector, which
// the webhook refuses at create.
func NewPlan(pods []corev1.Pod, r Rules) (Plan, error) {
	filters, err := r.filters()
	if err != nil {
		return Plan{}, err
	}
	plan := Plan{Skipped: map[types.NamespacedName]string{}}
	for i := range pods {
		pod := pods[i]
		status, marks := kubedrain.MakePodDeleteStatusOkay(), map[string]bool{}
		for _, f := range filters {
			if status = f(pod); !status.Delete {
				break
			}
			marks[status.Message] = true
		}
		switch {
		case !status.Delete:
			plan.Skipped[nameOf(&pod)] = status.Message
		case pod.DeletionTimestamp != nil && r.goneFromDeadNode(&pod):
			plan.Skipped[nameOf(&pod)] = SkipDeletedOnDeadNode(r.Policy.SkipWaitForDeleteTimeout.Duration)
		case pod.DeletionTimestamp != nil:
			plan.Terminating = append(plan.Terminating, pod)
		case marks[waitCompletedMessage]:
			plan.WaitCompleted = append(plan.WaitCompleted, pod)
		case marks[localDataMessage]:
			plan.LocalData = append(plan.LocalData, pod)
		default:
			plan.ToEvict = append(plan.ToEvict, pod)
		}
	}
	sortPods(plan.ToEvict)
	sortPods(plan.Terminating)
	sortPods(plan.WaitCompleted)
	sortPods(plan.LocalData)
	if r.EvictLast != nil {
		plan = plan.evictLast(r.EvictLast)
	}
	return plan, nil
}

// filters are the rules in kubectl's PodFilter form, applied in order: the
// first that keeps a pod on the node decides.
func (r Rules) filters() ([]kubedrain.PodFilter, error) {
	filters := []kubedrain.PodFilter{daemonSetFilter, mirrorPodFilter}
	if r.Policy != nil && r.Policy.PodSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(r.Policy.PodSelector)
		if err != nil {
			return nil, fmt.Errorf("spec.drain.podSelector is not a valid label selector: %w", err)
		}
		filters = append(filters, func(pod corev1.Pod) kubedrain.PodDeleteStatus {
			if sel.Matches(labels.Set(pod.Labels)) {
				return kubedrain.MakePodDeleteStatusOkay()
			}
			return kubedrain.MakePodDeleteStatusWithWarning(false, SkipNotSelected)
		})
	}
	filters = append(filters, drainLabelFilter, tolerantLateComerFilter(r.CordonedAt, nodestate.MaintenanceTaints))
	if r.Policy != nil && r.Policy.DeleteEmptyDirData != nil && !*r.Policy.DeleteEmptyDirData {
		filters = append(filters, localDataFilter)
	}
	return filters, nil
}

// localDataFilter applies spec.drain.deleteEmptyDirData false: a running pod
// with emptyDir volumes must leave but is not evicted (its data would be
// lost), as `kubectl drain` without --delete-emptydir-data refuses it; the
// drain waits for it (Plan.LocalData) and says why. A finished pod holds no
// data that runs.
func localDataFilter(pod corev1.Pod) kubedrain.PodDeleteStatus {
	if len(EmptyDirVolumes(&pod)) > 0 && !finished(&pod) {
		return kubedrain.MakePodDeleteStatusWithWarning(true, localDataMessage)
	}
	return kubedrain.MakePodDeleteStatusOkay()
}

// EmptyDirVolumes names the pod's emptyDir volumes.
func EmptyDirVolumes(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil {
			out = append(out, v.Name)
		}
	}
	return out
}

// goneFromDeadNode applies spec.drain.skipWaitForDeleteTimeout to a
// terminating pod: on a node that is not Ready, a pod whose deletion was due
// more than the timeout ago counts as gone (its kubelet cannot confirm it).
func (r Rules) goneFromDeadNode(pod *corev1.Pod) bool {
	if r.Policy == nil || r.Policy.SkipWaitForDeleteTimeout == nil || r.Node == nil || validation.NodeReady(r.Node) {
		return false
	}
	return r.Now.Sub(pod.DeletionTimestamp.Time) > r.Policy.SkipWaitForDeleteTimeout.Duration
}

// drainLabelFilter applies Cluster API's drain label: skip stays; a running
// wait-completed pod is waited for (kept, marked for NewPlan), a completed
// one stays.
func drainLabelFilter(pod corev1.Pod) kubedrain.PodDeleteStatus {
	switch pod.Labels[nmv1beta1.DrainLabel] {
	case nmv1beta1.DrainLabelSkip:
		return kubedrain.MakePodDeleteStatusWithWarning(false, SkipDrainLabel)
	case nmv1beta1.DrainLabelWaitCompleted:
		if finished(&pod) {
			return kubedrain.MakePodDeleteStatusWithWarning(false, SkipCompleted)
		}
		return kubedrain.MakePodDeleteStatusWithWarning(true, waitCompletedMessage)
	}
	return kubedrain.MakePodDeleteStatusOkay()
}

// daemonSetFilter keeps a running DaemonSet pod: its controller would put it
// right back, and the maintenance taints do not keep it off.
func daemonSetFilter(pod corev1.Pod) kubedrain.PodDeleteStatus {
	if ref := metav1.GetControllerOf(&pod); ref != nil && ref.Kind == "DaemonSet" && strings.HasPrefix(ref.APIVersion, "apps/") && !finished(&pod) {
		return kubedrain.MakePodDeleteStatusWithWarning(false, SkipDaemonSet)
	}
	return kubedrain.MakePodDeleteStatusOkay()
}

func mirrorPodFilter(pod corev1.Pod) kubedrain.PodDeleteStatus {
	if _, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return kubedrain.MakePodDeleteStatusWithWarning(false, SkipMirror)
	}
	return kubedrain.MakePodDeleteStatusOkay()
}

// tolerantLateComerFilter keeps a pod created after the cordon that
// tolerates every maintenance taint: it chose to run on a node in
// maintenance, and evicting it would only make its controller put a
// replacement back, forever.
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

// finished reports a pod that ran to its end (Succeeded or Failed): it holds
// nothing and runs nothing.
func finished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func nameOf(pod *corev1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
}
