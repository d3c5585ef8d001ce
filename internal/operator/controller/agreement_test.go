package controller

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
)

// The preview and the drain agree: for generated pods and policies, the
// pods the preview says a drain evicts, leaves and waits for are the pods the
// reconciler's first drain pass evicts, leaves and waits for. The e2e test
// of the same name proves it against a real API server for a few scenarios;
// this one covers many combinations, seeded so that a failure repeats.
func TestPreviewAgreesWithTheDrain(t *testing.T) {
	const cases = 150
	seen := map[string]bool{}
	for seed := range uint64(cases) {
		rng := rand.New(rand.NewPCG(seed, 27))
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			for _, r := range checkAgreement(t, generateDrainCase(rng)) {
				seen[r] = true
			}
		})
	}
	// The generator reaches every rule: each reason a pod stays or is
	// waited for comes up in some case.
	for _, r := range []string{drain.SkipDaemonSet, drain.SkipMirror, drain.SkipToleratesDrain, drain.SkipNotSelected, drain.SkipDrainLabel,
		drain.SkipCompleted, drain.SkipDeletedOnDeadNode(5 * time.Minute), drain.WaitTerminating, drain.WaitCompleted, drain.WaitLocalData} {
		if !seen[r] {
			t.Errorf("no generated case has a pod the preview lists as %q", r)
		}
	}
}

// drainCase is one generated node, its pods and a spec.drain.
type drainCase struct {
	ready  bool
	policy *nmv1beta1.DrainPolicy
	pods   []corev1.Pod
}

func (c drainCase) String() string {
	var pods []string
	for _, p := range c.pods {
		pods = append(pods, fmt.Sprintf("%s{owner %v, phase %s, deleted %v, labels %v, annotations %v, tolerations %d, emptyDir %v, created %s}",
			p.Name, p.OwnerReferences, p.Status.Phase, p.DeletionTimestamp, p.Labels, p.Annotations, len(p.Spec.Tolerations),
			drain.EmptyDirVolumes(&p), p.CreationTimestamp.UTC().Format(time.TimeOnly)))
	}
	return fmt.Sprintf("node Ready %v, policy %+v, pods:\n  %s", c.ready, c.policy, strings.Join(pods, "\n  "))
}

// agreementNow is the clock of the generated cases: the preview is made,
// and the node cordoned, at this moment.
var agreementNow = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

// generateDrainCase draws a node that is Ready or not, a policy with or
// without a podSelector, skipWaitForDeleteTimeout and grace period, and up
// to 12 pods of every kind the drain tells apart.
func generateDrainCase(rng *rand.Rand) drainCase {
	c := drainCase{ready: rng.IntN(2) == 0}
	if rng.IntN(3) > 0 {
		c.policy = &nmv1beta1.DrainPolicy{}
		if rng.IntN(2) == 0 {
			c.policy.PodSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"frozen"}}}}
		}
		if rng.IntN(2) == 0 {
			c.policy.SkipWaitForDeleteTimeout = &metav1.Duration{Duration: 5 * time.Minute}
		}
		if rng.IntN(2) == 0 {
			c.policy.GracePeriodSeconds = ptr.To[int64](3)
		}
		if rng.IntN(3) == 0 {
			c.policy.DeleteEmptyDirData = ptr.To(rng.IntN(2) == 0)
		}
	}
	for i := range 1 + rng.IntN(12) {
		c.pods = append(c.pods, generatePod(rng, fmt.Sprintf("pod-%02d", i)))
	}
	return c
}

func generatePod(rng *rand.Rand, name string) corev1.Pod {
	pick := func(n int) int { return rng.IntN(n) }
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{},
			CreationTimestamp: metav1.NewTime(agreementNow.Add(time.Duration(pick(3)-1) * time.Hour))}, // before, at or after the cordon
		Spec:   corev1.PodSpec{NodeName: testNode},
		Status: corev1.PodStatus{Phase: []corev1.PodPhase{corev1.PodRunning, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed}[pick(4)]},
	}
	switch pick(5) {
	case 1:
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs", Controller: ptr.To(true)}}
	case 2:
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "ds", Controller: ptr.To(true)}}
	case 3:
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "DaemonSet", Name: "other", UID: "x", Controller: ptr.To(true)}}
	case 4:
		p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
	}
	if pick(4) == 0 {
		deleted := metav1.NewTime(agreementNow.Add(-[]time.Duration{time.Minute, time.Hour}[pick(2)]))
		p.DeletionTimestamp = &deleted
		p.Finalizers = []string{"example.com/keep"} // an object with a deletionTimestamp needs one
	}
	switch pick(4) {
	case 1:
		p.Labels[nmv1beta1.DrainLabel] = nmv1beta1.DrainLabelSkip
	case 2:
		p.Labels[nmv1beta1.DrainLabel] = nmv1beta1.DrainLabelWaitCompleted
	}
	if pick(3) == 0 {
		p.Labels["tier"] = "frozen"
	}
	if pick(3) == 0 {
		p.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	}
	if pick(3) == 0 {
		p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	}
	return p
}

// checkAgreement previews the case, then runs the reconciler's first pass
// over it and compares the three lists. It returns the reasons the preview
// gave for the pods that stay or are waited for.
func checkAgreement(t *testing.T, c drainCase) (reasons []string) {
	t.Helper()
	node := readyNode(testNode)
	if !c.ready {
		node.Status.Conditions[0].Status = corev1.ConditionUnknown
	}
	preview, err := drain.NewPreview(drain.PreviewInput{Node: node.DeepCopy(), Pods: c.pods, Policy: c.policy, Now: agreementNow,
		Nodes: []corev1.Node{*node.DeepCopy(), *readyNode("spare")}})
	if err != nil {
		t.Fatalf("preview: %v\n%s", err, c)
	}
	nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: testNM, UID: "uid-1"},
		Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: testNode, Reason: "agreement", Drain: c.policy}}
	objs := []client.Object{node, readyNode("spare"), nm}
	for i := range c.pods {
		objs = append(objs, c.pods[i].DeepCopy())
	}
	e := newReconcileEnv(t, interceptor.Funcs{}, objs...)
	e.now = agreementNow
	var (
		mu      sync.Mutex // evictions run in parallel
		evicted []string
	)
	e.evict = func(p *corev1.Pod) error {
		mu.Lock()
		defer mu.Unlock()
		evicted = append(evicted, p.Name)
		return nil
	}
	e.reconcile()
	status := e.maintenance().Status
	if status.Phase == nmv1beta1.MaintenanceFailed {
		t.Fatalf("the maintenance failed: %s\n%s", status.LastError, c)
	}
	pending := map[string]bool{}
	for _, ref := range status.PendingPodsRefs {
		pending[ref.Name] = true
	}
	var waited, skipped []string
	for _, p := range c.pods {
		switch {
		case !pending[p.Name]:
			skipped = append(skipped, p.Name)
		case !slices.Contains(evicted, p.Name):
			waited = append(waited, p.Name)
		}
	}
	for _, r := range append(slices.Clone(preview.Skip), preview.WaitFor...) {
		reasons = append(reasons, r.Reason)
	}
	compareLists(t, c, "evicts", podNames(preview.Evict), evicted)
	compareLists(t, c, "waits for", reasonNames(preview.WaitFor), waited)
	compareLists(t, c, "leaves", reasonNames(preview.Skip), skipped)
	// The reasons too: the event that starts the drain counts the pods that
	// stay by reason, as the preview's summary does.
	if staying := stayingSummary(preview.Skip); staying != "" && !strings.Contains(e.events(), "staying: "+staying) {
		t.Errorf("the drain's BeginMaintenance event does not count the pods that stay as the preview does (%s):\n%s\n%s", staying, e.events(), c)
	}
	return reasons
}

func compareLists(t *testing.T, c drainCase, what string, preview, drained []string) {
	t.Helper()
	slices.Sort(preview)
	slices.Sort(drained)
	if !slices.Equal(preview, drained) {
		t.Errorf("the preview says a drain %s %v, the drain %s %v\n%s", what, preview, what, drained, c)
	}
}

func podNames(pods []types.NamespacedName) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func reasonNames(pods []drain.PodReason) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.Pod.Name)
	}
	return out
}

// stayingSummary counts the preview's pods that stay by reason, in the form
// of drain.Plan.SkippedSummary.
func stayingSummary(skip []drain.PodReason) string {
	plan := drain.Plan{Skipped: map[types.NamespacedName]string{}}
	for _, r := range skip {
		plan.Skipped[r.Pod] = r.Reason
	}
	return plan.SkippedSummary()
}
