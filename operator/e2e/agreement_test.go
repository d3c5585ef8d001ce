package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain/live"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// The preview of a node, taken right before its NodeMaintenance is created
// with the same spec.drain, lists exactly the pods the drain then evicts,
// leaves alone and waits for. Each scenario runs on a fresh node of its own;
// together they cover the drain's rules. The drain is watched from outside:
// a pod it evicted was not terminating and then became terminating or gone
// (and the API server's audit log holds the eviction); a pod it waited for
// showed up in status.pendingPodsRefs without being evicted (the test lets
// it go once the drain waits for nothing else); any other pod was skipped.
func TestPreviewAgreesWithTheDrain(t *testing.T) {
	c := testcluster.Get(t)
	for _, tt := range agreementScenarios {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n := newScenarioNode(t, c, tt.dead)
			tt.setup(n)
			if n.pool != nil { // room for the evicted pods' replacements
				c.WaitNotReadyTaintGone(t, n.pool.AddNode(t, ""))
			}

			before := n.pods()
			preview, err := live.Preview(bg(), c.Client, n.name, &tt.policy, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("preview: %s", preview.Summary())
			name := testcluster.UniqueName(t, "agree")
			createWithPolicy(t, c, name, n.name, tt.policy)
			did := watchDrain(t, c, name, n.ns, before)

			assertPreviewSaid(t, preview, did)
			assertEvictionsAudited(t, c, n.ns, did)
			for pod, f := range did {
				if want := tt.want[before[pod].Labels["app"]]; f != want {
					t.Errorf("the drain %s pod %s (app %s), the scenario means it to be %s: it no longer covers what it says",
						f.did(), pod, before[pod].Labels["app"], want.did())
				}
			}
		})
	}
}

// skipWaitTimeout is the dead-node scenario's spec.drain.skipWaitForDeleteTimeout.
const skipWaitTimeout = 10 * time.Second

// agreementScenarios are the workloads and policies of
// TestPreviewAgreesWithTheDrain. want says, by app label, what each pod is
// there for: what the drain must do to it for the scenario to cover its
// rule.
var agreementScenarios = []struct {
	name   string
	policy nmv1beta1.DrainPolicy
	// dead puts the scenario on a NotReady node that nobody runs.
	dead  bool
	setup func(n *scenarioNode)
	want  map[string]fate
}{{
	name: "controllers-budget-mirror-finished",
	setup: func(n *scenarioNode) {
		n.deployment("web", 2)
		n.c.CreatePDB(n.t, n.ns, "web", nil, ptr.To(intstr.FromInt32(1)))
		waitBudget(n.t, n.c, n.ns, "web", 2) // allows one disruption
		n.c.CreateDaemonSet(n.t, n.ns, "agent", map[string]string{corev1.LabelHostname: n.name})
		n.c.WaitRunningPods(n.t, n.ns, "agent", n.name, 1)
		n.pod("static", withAnnotation(corev1.MirrorPodAnnotationKey, "static"))
		n.pod("bare")
		n.finished("succeeded", corev1.PodSucceeded)
		n.finished("failed", corev1.PodFailed)
	},
	want: map[string]fate{"web": evict, "agent": skip, "static": skip, "bare": evict, "succeeded": evict, "failed": evict},
}, {
	name: "terminating-and-cluster-api-labels",
	setup: func(n *scenarioNode) {
		n.deployment("web", 1)
		n.terminating("leaving")
		n.terminating("leaving-skip", withLabel(nmv1beta1.DrainLabel, nmv1beta1.DrainLabelSkip))
		n.pod("keep", withLabel(nmv1beta1.DrainLabel, nmv1beta1.DrainLabelSkip))
		n.pod("job", withLabel(nmv1beta1.DrainLabel, nmv1beta1.DrainLabelWaitCompleted))
		n.finished("job-done", corev1.PodSucceeded, withLabel(nmv1beta1.DrainLabel, nmv1beta1.DrainLabelWaitCompleted))
	},
	want: map[string]fate{"web": evict, "leaving": waitFor, "leaving-skip": skip, "keep": skip, "job": waitFor, "job-done": skip},
}, {
	name:   "pod-selector",
	policy: nmv1beta1.DrainPolicy{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "batch"}}},
	setup: func(n *scenarioNode) {
		batch := withLabel("tier", "batch")
		n.deployment("batch", 2, batch)
		n.deployment("web", 1)
		n.terminating("leaving")
		n.terminating("leaving-batch", batch)
		n.pod("job", batch, withLabel(nmv1beta1.DrainLabel, nmv1beta1.DrainLabelWaitCompleted))
		n.pod("job-other", withLabel(nmv1beta1.DrainLabel, nmv1beta1.DrainLabelWaitCompleted))
	},
	want: map[string]fate{"batch": evict, "web": skip, "leaving": skip, "leaving-batch": waitFor, "job": waitFor, "job-other": skip},
}, {
	// On a NotReady node, pods deleted longer ago than the timeout count as
	// gone: the drain neither waits for them nor evicts them. A pod
	// deleted moments before is waited for until its deletion is that old,
	// and so is the one the drain evicts (it never terminates: no kubelet).
	// Failed while the preview did not apply skipWaitForDeleteTimeout
	// (issue #27): it said it waits for gone-a and gone-b.
	name:   "dead-node-skip-wait-for-delete-timeout",
	policy: nmv1beta1.DrainPolicy{SkipWaitForDeleteTimeout: &metav1.Duration{Duration: skipWaitTimeout}},
	dead:   true,
	setup: func(n *scenarioNode) {
		n.pod("fresh")
		old := []*corev1.Pod{n.terminating("gone-a"), n.terminating("gone-b")}
		for _, p := range old {
			time.Sleep(time.Until(p.DeletionTimestamp.Add(skipWaitTimeout + time.Second)))
		}
		n.terminating("recent")
	},
	want: map[string]fate{"fresh": evict, "gone-a": skip, "gone-b": skip, "recent": waitFor},
}, {
	// deleteEmptyDirData false: a running pod with emptyDir data is not
	// evicted but waited for (the test deletes it, as its owner would); a
	// finished one, and the pods without emptyDir, are evicted.
	name:   "empty-dir-data-kept",
	policy: nmv1beta1.DrainPolicy{DeleteEmptyDirData: ptr.To(false)},
	setup: func(n *scenarioNode) {
		n.deployment("web", 1)
		n.pod("scratch", testcluster.WithEmptyDir(), withLabel(deleteToRelease, "true"))
		n.finished("scratch-done", corev1.PodSucceeded, testcluster.WithEmptyDir())
	},
	want: map[string]fate{"web": evict, "scratch": waitFor, "scratch-done": evict},
}}

// deleteToRelease labels a running pod the test holds only by not deleting
// it: it lets the pod go by deleting it.
const deleteToRelease = "test.nodemaintenance.io/delete-to-release"

// fate is what a drain does to a pod, or what a preview says it will.
type fate int

const (
	evict fate = iota + 1
	skip
	waitFor
)

// says is the fate as the preview words it, did as the drain's deed.
func (f fate) says() string { return [...]string{"?", "evict", "skip", "wait for"}[f] }
func (f fate) did() string  { return [...]string{"?", "evicted", "skipped", "waited for"}[f] }

// holdFinalizer keeps a deleted pod terminating until the test lets it go.
const holdFinalizer = "nodemaintenance.test/hold"

// scenarioNode is the fresh node of one scenario and its namespace, and
// puts pods there.
type scenarioNode struct {
	t        *testing.T
	c        *testcluster.Cluster
	ns, name string
	// pool is the node's pool; nil on a dead node.
	pool *testcluster.Pool
}

// newScenarioNode makes a fresh node (a dead one: NotReady, nobody runs
// it) and a namespace. At cleanup, after the NodeMaintenance is gone, the
// pods of the namespace lose the test's finalizer and are deleted at once.
func newScenarioNode(t *testing.T, c *testcluster.Cluster, dead bool) *scenarioNode {
	n := &scenarioNode{t: t, c: c, ns: c.Namespace(t)}
	t.Cleanup(func() {
		pods := &corev1.PodList{}
		if err := c.Client.List(bg(), pods, client.InNamespace(n.ns)); err != nil {
			t.Errorf("list the pods of %s to let them go: %v", n.ns, err)
			return
		}
		for i := range pods.Items {
			if err := release(bg(), c, &pods.Items[i]); err != nil {
				t.Errorf("let pod %s/%s go: %v", n.ns, pods.Items[i].Name, err)
			}
			_ = c.Client.Delete(bg(), &pods.Items[i], client.GracePeriodSeconds(0))
		}
	})
	if dead {
		n.name = deadNode(t, c)
	} else {
		n.pool = c.NewPool(t)
		n.name = n.pool.AddNode(t, "").Name
	}
	return n
}

// deployment runs replicas pods of Deployment app on the node.
func (n *scenarioNode) deployment(app string, replicas int32, opts ...testcluster.PodOption) {
	n.t.Helper()
	n.c.CreateDeployment(n.t, n.ns, app, replicas, n.pool.Selector(), opts...)
	n.c.WaitRunningPods(n.t, n.ns, app, n.name, int(replicas))
}

// pod creates a bare pod on the node and, unless the node is dead, waits
// until it runs.
func (n *scenarioNode) pod(name string, opts ...testcluster.PodOption) *corev1.Pod {
	n.t.Helper()
	pod := n.c.CreateBarePod(n.t, n.ns, name, n.name, opts...)
	if n.pool != nil {
		n.c.WaitRunningPods(n.t, n.ns, name, n.name, 1)
	}
	return pod
}

// finished is a bare pod that ran and ended in phase, as its kubelet would
// report it.
func (n *scenarioNode) finished(name string, phase corev1.PodPhase, opts ...testcluster.PodOption) {
	n.t.Helper()
	if err := setPhase(bg(), n.c, n.pod(name, opts...), phase); err != nil {
		n.t.Fatalf("set the phase of pod %s/%s to %s: %v", n.ns, name, phase, err)
	}
}

// terminating is a bare pod, deleted, that the test's finalizer keeps
// terminating until the test lets it go. It returns the deleted pod.
func (n *scenarioNode) terminating(name string, opts ...testcluster.PodOption) *corev1.Pod {
	n.t.Helper()
	pod := n.pod(name, append(opts, withFinalizer(holdFinalizer))...)
	if err := n.c.Client.Delete(bg(), pod); err != nil {
		n.t.Fatalf("delete pod %s/%s: %v", n.ns, name, err)
	}
	if err := n.c.Client.Get(bg(), client.ObjectKeyFromObject(pod), pod); err != nil || pod.DeletionTimestamp == nil {
		n.t.Fatalf("pod %s/%s is not terminating after its delete: %v", n.ns, name, err)
	}
	return pod
}

// pods are the pods on the node, by name.
func (n *scenarioNode) pods() map[string]corev1.Pod {
	n.t.Helper()
	pods, err := n.c.PodsOnNode(bg(), n.name)
	if err != nil {
		n.t.Fatal(err)
	}
	out := map[string]corev1.Pod{}
	for _, p := range pods {
		out[p.Name] = p
	}
	return out
}

// watchDrain follows the drain of NodeMaintenance name until it Succeeds
// and returns what it did to each pod of before (all in ns). Once every
// pending pod is one the test holds (its finalizer, or a running
// wait-completed pod), the test lets those go: the drain waits for nothing
// else.
func watchDrain(t *testing.T, c *testcluster.Cluster, name, ns string, before map[string]corev1.Pod) map[string]fate {
	t.Helper()
	pending, left, released := map[string]bool{}, map[string]bool{}, map[string]bool{}
	testcluster.WaitFor(t, phaseTimeout, "the drain of NodeMaintenance "+name+" to succeed", func(ctx context.Context) (bool, error) {
		nm := &nmv1beta1.NodeMaintenance{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, nm); err != nil {
			return false, err
		}
		if nm.Status.Phase == nmv1beta1.MaintenanceFailed {
			t.Fatalf("NodeMaintenance %s failed: %s", name, nm.Status.LastError)
		}
		pendingNow := map[string]bool{}
		for _, ref := range nm.Status.PendingPodsRefs {
			pending[ref.Name], pendingNow[ref.Name] = true, true
		}
		list := &corev1.PodList{}
		if err := c.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		now := map[string]*corev1.Pod{}
		for i := range list.Items {
			now[list.Items[i].Name] = &list.Items[i]
		}
		for pod, was := range before {
			if p := now[pod]; was.DeletionTimestamp == nil && !released[pod] && (p == nil || p.DeletionTimestamp != nil) {
				left[pod] = true
			}
		}
		if nm.Status.Phase == nmv1beta1.MaintenanceSucceeded {
			return true, nil
		}
		onlyHeld := len(pendingNow) > 0
		for pod := range pendingNow {
			onlyHeld = onlyHeld && held(now[pod])
		}
		if onlyHeld {
			for pod := range pendingNow {
				if err := release(ctx, c, now[pod]); err != nil {
					return false, fmt.Errorf("let pod %s/%s go: %w", ns, pod, err)
				}
				released[pod] = true // what becomes of it now is the test's doing
				t.Logf("the drain waits only for pods the test holds: let %s go", pod)
			}
		}
		return false, fmt.Errorf("phase %s, pending %v, lastError %q", nm.Status.Phase, nm.Status.PendingPods, nm.Status.LastError)
	})
	did := map[string]fate{}
	for pod := range before {
		switch {
		case left[pod]:
			did[pod] = evict
		case pending[pod]:
			did[pod] = waitFor
		default:
			did[pod] = skip
		}
	}
	return did
}

// held reports whether the test keeps pod from leaving: its finalizer, or
// a running pod labelled wait-completed (it completes when the test says).
func held(pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	return controllerutil.ContainsFinalizer(pod, holdFinalizer) || pod.DeletionTimestamp == nil && pod.Labels[deleteToRelease] != "" ||
		pod.DeletionTimestamp == nil && pod.Labels[nmv1beta1.DrainLabel] == nmv1beta1.DrainLabelWaitCompleted &&
			pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// release lets a pod the test holds go: it removes the test's finalizer,
// or completes a running wait-completed pod.
func release(ctx context.Context, c *testcluster.Cluster, pod *corev1.Pod) error {
	switch {
	case controllerutil.ContainsFinalizer(pod, holdFinalizer):
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p := &corev1.Pod{}
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
				return client.IgnoreNotFound(err)
			}
			if !controllerutil.RemoveFinalizer(p, holdFinalizer) {
				return nil
			}
			return client.IgnoreNotFound(c.Client.Update(ctx, p))
		})
	case pod.DeletionTimestamp == nil && pod.Labels[deleteToRelease] != "":
		return client.IgnoreNotFound(c.Client.Delete(ctx, pod))
	case held(pod):
		return setPhase(ctx, c, pod, corev1.PodSucceeded)
	}
	return nil
}

// setPhase sets a pod's status.phase, as its kubelet would.
func setPhase(ctx context.Context, c *testcluster.Cluster, pod *corev1.Pod, phase corev1.PodPhase) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &corev1.Pod{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
			return err
		}
		p.Status.Phase = phase
		return c.Client.Status().Update(ctx, p)
	})
}

// assertPreviewSaid compares the preview's evict, skip and wait-for lists
// with what the drain did, pod by pod.
func assertPreviewSaid(t *testing.T, p drain.Preview, did map[string]fate) {
	t.Helper()
	said, why := map[string]fate{}, map[string]string{}
	for _, pod := range p.Evict {
		said[pod.Name] = evict
	}
	for f, reasons := range map[fate][]drain.PodReason{skip: p.Skip, waitFor: p.WaitFor} {
		for _, r := range reasons {
			said[r.Pod.Name], why[r.Pod.Name] = f, " ("+r.Reason+")"
		}
	}
	pods := slices.Collect(maps.Keys(said))
	for pod := range did {
		if _, listed := said[pod]; !listed {
			pods = append(pods, pod)
		}
	}
	slices.Sort(pods)
	for _, pod := range pods {
		s, listed := said[pod]
		d, seen := did[pod]
		switch {
		case !listed:
			t.Errorf("the preview does not list pod %s, the drain %s it", pod, d.did())
		case !seen:
			t.Errorf("preview says %s %s%s, which was not on the node before the maintenance", s.says(), pod, why[pod])
		case s != d:
			t.Errorf("preview says %s %s%s, the drain %s it", s.says(), pod, why[pod], d.did())
		}
	}
}

// assertEvictionsAudited checks that the pods the drain is taken to have
// evicted are those whose eviction the API server accepted.
func assertEvictionsAudited(t *testing.T, c *testcluster.Cluster, ns string, did map[string]fate) {
	t.Helper()
	accepted, _, err := c.Evictions(bg(), ns)
	if err != nil {
		t.Fatal(err)
	}
	for pod, f := range did {
		if audited := len(accepted[pod]) > 0; audited != (f == evict) {
			t.Errorf("pod %s: the drain %s it, but the audit log holds %d accepted evictions of it", pod, f.did(), len(accepted[pod]))
		}
	}
}

// withLabel adds a label to a pod or pod template.
func withLabel(key, value string) testcluster.PodOption {
	return func(_ *corev1.PodSpec, m *metav1.ObjectMeta) { metav1.SetMetaDataLabel(m, key, value) }
}

// withAnnotation adds an annotation to a pod or pod template.
func withAnnotation(key, value string) testcluster.PodOption {
	return func(_ *corev1.PodSpec, m *metav1.ObjectMeta) { metav1.SetMetaDataAnnotation(m, key, value) }
}

// withFinalizer adds a finalizer to a pod.
func withFinalizer(finalizer string) testcluster.PodOption {
	return func(_ *corev1.PodSpec, m *metav1.ObjectMeta) { m.Finalizers = append(m.Finalizers, finalizer) }
}
