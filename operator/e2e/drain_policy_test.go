package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/controller"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/webhook"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// createWithPolicy creates a NodeMaintenance of node with spec.drain, and
// deletes it at cleanup.
func createWithPolicy(t *testing.T, c *testcluster.Cluster, name, node string, p nmv1beta1.DrainPolicy) {
	t.Helper()
	nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node, Drain: &p}}
	if err := c.Client.Create(bg(), nm); err != nil {
		t.Fatalf("create NodeMaintenance %s for node %s with spec.drain %+v: %v", name, node, p, err)
	}
	t.Cleanup(func() { deleteMaintenance(t, c, name) })
}

// neverAllows is a node with 2 pods under a PDB that allows no disruption.
func neverAllows(t *testing.T, c *testcluster.Cluster) (ns, node string) {
	t.Helper()
	ns = c.Namespace(t)
	return ns, deploymentNode(t, c, ns, "db", 2, ptr.To(intstr.FromInt32(2)), nil)
}

// spec.drain.timeout with onTimeout Fail: Running until the deadline, then
// Failed with the blockers named and the node left in maintenance; delete
// restores it exactly.
func TestDrainTimeoutFail(t *testing.T) {
	c := testcluster.Get(t)
	ns, node := neverAllows(t, c)
	before := settledStateOf(t, c, node)
	name := testcluster.UniqueName(t, "timeout-fail")
	const timeout = 5 * time.Second
	createWithPolicy(t, c, name, node, nmv1beta1.DrainPolicy{Timeout: &metav1.Duration{Duration: timeout}, OnTimeout: nmv1beta1.DrainTimeoutFail})
	nm := waitPhase(t, c, name, nmv1beta1.MaintenanceFailed)
	cordoned := prior(t, nm)
	if failedAt := nm.Status.LastUpdate.Time; failedAt.Before(cordoned.Add(timeout)) { // both in whole seconds
		t.Errorf("Failed at %s, before the deadline %s (cordoned at %s + %s)", failedAt, cordoned.Add(timeout), cordoned, timeout)
	}
	for _, want := range []string{"timed out after 5s", "left cordoned", "PodDisruptionBudget", ns + "/"} {
		if !strings.Contains(nm.Status.LastError, want) {
			t.Errorf("lastError %q does not say %q", nm.Status.LastError, want)
		}
	}
	assertCondition(t, nm, nmv1beta1.ConditionDrained, metav1.ConditionFalse, nmv1beta1.ReasonTimedOut)
	assertInMaintenance(t, getNode(t, c, node))
	if pods, _ := c.PodsOnNode(bg(), node); len(pods) != 2 {
		t.Errorf("%d pods on the node after the timeout, want the 2 the PDB protects", len(pods))
	}
	deleteMaintenance(t, c, name)
	assertSameNodeState(t, node, before, stateOf(t, c, node))
}

// prior reads when the maintenance cordoned the node, from the record of
// the node's prior state on the NodeMaintenance.
func prior(t *testing.T, nm *nmv1beta1.NodeMaintenance) time.Time {
	t.Helper()
	p, err := nodestate.Decode(nm.Annotations[nodestate.PriorStateAnnotation])
	if err != nil {
		t.Fatalf("NodeMaintenance %s: %v", nm.Name, err)
	}
	return p.CordonedAt
}

func assertCondition(t *testing.T, nm *nmv1beta1.NodeMaintenance, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	cond := meta.FindStatusCondition(nm.Status.Conditions, typ)
	if cond == nil || cond.Status != status || cond.Reason != reason {
		t.Errorf("NodeMaintenance %s condition %s = %+v, want status %s reason %s", nm.Name, typ, cond, status, reason)
	}
}

// onTimeout Restore: Failed, and the node restored at once, without
// deleting the NodeMaintenance; a later delete leaves the node alone.
func TestDrainTimeoutRestore(t *testing.T) {
	c := testcluster.Get(t)
	_, node := neverAllows(t, c)
	before := settledStateOf(t, c, node)
	name := testcluster.UniqueName(t, "timeout-restore")
	createWithPolicy(t, c, name, node, nmv1beta1.DrainPolicy{Timeout: &metav1.Duration{Duration: 3 * time.Second}, OnTimeout: nmv1beta1.DrainTimeoutRestore})
	nm := waitPhase(t, c, name, nmv1beta1.MaintenanceFailed)
	if !strings.Contains(nm.Status.LastError, "was restored") {
		t.Errorf("lastError %q does not say the node was restored", nm.Status.LastError)
	}
	assertCondition(t, nm, nmv1beta1.ConditionCordoned, metav1.ConditionFalse, nmv1beta1.ReasonRestored)
	assertCondition(t, nm, nmv1beta1.ConditionDrained, metav1.ConditionFalse, nmv1beta1.ReasonTimedOut)
	assertSameNodeState(t, node, before, stateOf(t, c, node))
	if _, err := getLease(c, node); err == nil {
		t.Errorf("the lease of node %s is still there after the restore", node)
	}
	// Someone cordons the node after the restore: the delete must not undo it.
	setUnschedulable(t, c, node, true)
	deleteMaintenance(t, c, name)
	if !getNode(t, c, node).Spec.Unschedulable {
		t.Errorf("deleting the NodeMaintenance after a Restore uncordoned node %s, which someone cordoned since", node)
	}
	setUnschedulable(t, c, node, false)
}

// onTimeout Force, allowed: the pods the PDB protects are deleted at the
// deadline, with events, and the maintenance Succeeds. Not allowed: the
// webhook refuses it.
func TestDrainTimeoutForce(t *testing.T) {
	c := testcluster.Get(t)
	policy := nmv1beta1.DrainPolicy{Timeout: &metav1.Duration{Duration: 3 * time.Second}, OnTimeout: nmv1beta1.DrainTimeoutForce}

	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: testcluster.UniqueName(t, "force-refused")}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node, Drain: &policy}}
	err := c.Client.Create(bg(), nm)
	if err == nil {
		t.Fatalf("onTimeout Force was admitted by an operator without --allow-force-drain")
	}
	if !strings.Contains(err.Error(), "allow_force_drain") {
		t.Errorf("the refusal of Force does not say how to allow it: %v", err)
	}

	o := defaultOptions()
	o.Controller.AllowForceDrain = true
	restartOperator(t, c, o)
	_, node = neverAllows(t, c)
	name := testcluster.UniqueName(t, "force")
	createWithPolicy(t, c, name, node, policy)
	done := waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
	assertCondition(t, done, nmv1beta1.ConditionDrained, metav1.ConditionTrue, nmv1beta1.ReasonForced)
	pods, err := c.PodsOnNode(bg(), node)
	if err != nil || len(pods) != 0 {
		t.Fatalf("%d pods left on node %s after a forced drain (%v)", len(pods), node, err)
	}
	// An event on the pod, the node and the NodeMaintenance for each of the 2 pods.
	testcluster.WaitFor(t, time.Minute, "the forced deletions' events", func(ctx context.Context) (bool, error) {
		events := &eventsv1.EventList{}
		if err := c.Client.List(ctx, events); err != nil {
			return false, err
		}
		on := map[string]int{}
		for _, e := range events.Items {
			if e.Reason == controller.ReasonForcedDelete && strings.Contains(e.Note, name) {
				on[e.Regarding.Kind]++
			}
		}
		if on["Pod"] == 2 && on["Node"] == 2 && on[nmv1beta1.Kind] == 2 {
			return true, nil
		}
		return false, fmt.Errorf("%s events by the kind of object they regard: %v (of %d events)", controller.ReasonForcedDelete, on, len(events.Items))
	})
}

// podSelector: only the pods it matches leave. Cluster API's drain label:
// skip stays, wait-completed is never evicted and is waited for until it
// completes.
func TestDrainPodSelectorAndClusterAPILabels(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	label := func(v string) testcluster.PodOption {
		return func(_ *corev1.PodSpec, m *metav1.ObjectMeta) {
			if m.Labels == nil {
				m.Labels = map[string]string{}
			}
			m.Labels["tier"] = "batch"
			if v != "" {
				m.Labels[nmv1beta1.DrainLabel] = v
			}
		}
	}
	c.CreateDeployment(t, ns, "web", 2, pool.Selector())
	c.CreateDeployment(t, ns, "batch", 2, pool.Selector(), label(""))
	c.CreateDeployment(t, ns, "cache", 1, pool.Selector(), label(nmv1beta1.DrainLabelSkip))
	job := c.CreateBarePod(t, ns, "job", node, label(nmv1beta1.DrainLabelWaitCompleted))
	c.WaitRunningPods(t, ns, "web", node, 2)
	c.WaitRunningPods(t, ns, "batch", node, 2)
	c.WaitRunningPods(t, ns, "cache", node, 1)
	c.WaitRunningPods(t, ns, "job", node, 1)
	pool.AddNode(t, "")

	name := testcluster.UniqueName(t, "select")
	createWithPolicy(t, c, name, node, nmv1beta1.DrainPolicy{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "batch"}}})
	nm := waitMaintenance(t, c, name, "the batch pods gone, the job waited for", func(nm *nmv1beta1.NodeMaintenance) bool {
		return nm.Status.Phase == nmv1beta1.MaintenanceRunning && len(nm.Status.PendingPods) == 1 && nm.Status.PendingPods[0] == "job"
	})
	assertCondition(t, nm, nmv1beta1.ConditionDrained, metav1.ConditionFalse, nmv1beta1.ReasonWaiting)
	// Seconds later the job is still there, not evicted.
	time.Sleep(2 * time.Second)
	p := &corev1.Pod{}
	if err := c.Client.Get(bg(), client.ObjectKeyFromObject(job), p); err != nil || p.DeletionTimestamp != nil {
		t.Fatalf("the wait-completed pod was evicted or is gone: %v %+v", err, p.DeletionTimestamp)
	}
	p.Status.Phase = corev1.PodSucceeded
	if err := c.Client.Status().Update(bg(), p); err != nil {
		t.Fatalf("complete the job pod: %v", err)
	}
	waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
	left := map[string]int{}
	pods, err := c.PodsOnNode(bg(), node)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			left[p.Labels["app"]]++
		}
	}
	if left["web"] != 2 || left["cache"] != 1 || left["job"] != 1 || left["batch"] != 0 {
		t.Errorf("pods left on the node by app: %v, want web 2 (not selected), cache 1 (skip), job 1 (completed), batch 0", left)
	}
}

// deleteEmptyDirData false: the pods with emptyDir data stay on the node,
// the others leave, and the maintenance waits saying why (lastError names
// the pod and the field) until the pod is deleted, then Succeeds.
func TestDrainKeepsEmptyDirDataWhenNotAllowed(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	c.CreateDeployment(t, ns, "web", 2, pool.Selector())
	scratch := c.CreateBarePod(t, ns, "scratch", node, testcluster.WithEmptyDir())
	c.WaitRunningPods(t, ns, "web", node, 2)
	c.WaitRunningPods(t, ns, "scratch", node, 1)
	pool.AddNode(t, "")

	name := testcluster.UniqueName(t, "emptydir")
	createWithPolicy(t, c, name, node, nmv1beta1.DrainPolicy{DeleteEmptyDirData: ptr.To(false)})
	nm := waitMaintenance(t, c, name, "the web pods gone, the scratch pod kept and explained", func(nm *nmv1beta1.NodeMaintenance) bool {
		return nm.Status.Phase == nmv1beta1.MaintenanceRunning && len(nm.Status.PendingPods) == 1 && nm.Status.PendingPods[0] == "scratch" &&
			strings.Contains(nm.Status.LastError, "pod "+ns+"/scratch has emptyDir data and spec.drain.deleteEmptyDirData is false")
	})
	assertCondition(t, nm, nmv1beta1.ConditionDrained, metav1.ConditionFalse, nmv1beta1.ReasonWaiting)
	if c := meta.FindStatusCondition(nm.Status.Conditions, nmv1beta1.ConditionDrained); !strings.Contains(c.Message, "spec.drain.deleteEmptyDirData is false") {
		t.Errorf("the Drained condition does not say why the drain waits: %q", c.Message)
	}
	// Seconds later the pod is still there, not evicted.
	time.Sleep(2 * time.Second)
	p := &corev1.Pod{}
	if err := c.Client.Get(bg(), client.ObjectKeyFromObject(scratch), p); err != nil || p.DeletionTimestamp != nil {
		t.Fatalf("the pod with emptyDir data was evicted or is gone: %v %+v", err, p.DeletionTimestamp)
	}
	if err := c.Client.Delete(bg(), p); err != nil {
		t.Fatalf("delete the scratch pod: %v", err)
	}
	if nm := waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded); nm.Status.LastError != "" {
		t.Errorf("lastError %q after the drain ended", nm.Status.LastError)
	}
}

// gracePeriodSeconds overrides the pod's own grace period.
func TestDrainGracePeriodOverride(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	node := deploymentNode(t, c, ns, "slow", 1, nil, nil, testcluster.WithTerminationDelay(20*time.Second))
	name := testcluster.UniqueName(t, "grace")
	createWithPolicy(t, c, name, node, nmv1beta1.DrainPolicy{GracePeriodSeconds: ptr.To[int64](3)})
	testcluster.WaitFor(t, time.Minute, "the pod terminating", func(ctx context.Context) (bool, error) {
		pods, err := c.PodsOnNode(ctx, node)
		for _, p := range pods {
			if p.DeletionTimestamp != nil {
				if g := ptr.Deref(p.DeletionGracePeriodSeconds, -1); g != 3 {
					t.Fatalf("pod %s terminates with a grace period of %d s (its own is %d), want the override 3", p.Name, g, ptr.Deref(p.Spec.TerminationGracePeriodSeconds, -1))
				}
				return true, nil
			}
		}
		return false, err
	})
}

// skipWaitForDeleteTimeout: on a node that is NotReady (no kubelet: kwok
// does not manage it), evicted pods stay terminating, since nobody confirms
// they stopped; once their deletion is older than the timeout they count as
// gone and the maintenance Succeeds. Without the field it would wait.
func TestDrainSkipWaitForDeleteOnDeadNode(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	node := deadNode(t, c)
	for _, name := range []string{"stuck-a", "stuck-b"} {
		c.CreateBarePod(t, ns, name, node)
	}
	t.Cleanup(func() {
		for _, name := range []string{"stuck-a", "stuck-b"} {
			_ = c.Client.Delete(bg(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, client.GracePeriodSeconds(0))
		}
	})

	name := testcluster.UniqueName(t, "deadnode")
	createWithPolicy(t, c, name, node, nmv1beta1.DrainPolicy{SkipWaitForDeleteTimeout: &metav1.Duration{Duration: 2 * time.Second}})
	nm := waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
	pods, err := c.PodsOnNode(bg(), node)
	if err != nil {
		t.Fatal(err)
	}
	stuck := 0
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			stuck++
		}
	}
	if stuck != 2 || nm.Status.EvictionPods != 2 {
		t.Errorf("%d pods stuck terminating on the dead node, %d evicted; want 2 and 2 (the maintenance must not have waited for a kubelet)", stuck, nm.Status.EvictionPods)
	}
}

// kubectl wait --for=condition=Drained returns once the maintenance
// Succeeded; the spec.drain of a NodeMaintenance cannot change.
func TestDrainedConditionAndImmutablePolicy(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	node := deploymentNode(t, c, ns, "web", 3, nil, nil)
	name := testcluster.UniqueName(t, "wait")
	createWithPolicy(t, c, name, node, nmv1beta1.DrainPolicy{Timeout: &metav1.Duration{Duration: time.Hour}})
	out, err := c.Kubectl(bg(), "wait", "--for=condition=Drained", "nodemaintenance/"+name, "--timeout=60s")
	if err != nil {
		t.Fatalf("kubectl wait --for=condition=Drained: %v\n%s", err, out)
	}
	nm := getMaintenance(t, c, name)
	if nm.Status.Phase != nmv1beta1.MaintenanceSucceeded {
		t.Errorf("kubectl wait returned with phase %s", nm.Status.Phase)
	}
	for _, typ := range []string{nmv1beta1.ConditionCordoned, nmv1beta1.ConditionLeaseHeld, nmv1beta1.ConditionDrained} {
		assertCondition(t, nm, typ, metav1.ConditionTrue, map[string]string{
			nmv1beta1.ConditionCordoned: nmv1beta1.ReasonCordoned, nmv1beta1.ConditionLeaseHeld: nmv1beta1.ReasonLeaseHeld, nmv1beta1.ConditionDrained: nmv1beta1.ReasonDrained,
		}[typ])
	}
	// The operator writes the object too; a conflict is not the answer
	// under test, so retry until the webhook answers.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		nm := getMaintenance(t, c, name)
		nm.Spec.Drain.Timeout = &metav1.Duration{Duration: 2 * time.Hour}
		return c.Client.Update(bg(), nm)
	})
	if err == nil || !strings.Contains(err.Error(), webhook.ErrDrainImmutable) {
		t.Errorf("changing spec.drain.timeout: %v, want the webhook's refusal", err)
	}
	if got := getMaintenance(t, c, name).Spec.Drain.Timeout.Duration; got != time.Hour {
		t.Errorf("spec.drain.timeout changed to %s", got)
	}
}
