package e2e

// Rollouts: a NodeMaintenanceRollout maintains a set of nodes a few at a
// time through child NodeMaintenances, with a step Job on each drained node.

import (
	"context"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testoperator"
)

// Ten nodes, maxUnavailable 3, a step Job on each and a soak: never more
// than three nodes of the set out of service, each step ran on its node
// while it was drained, each slot given on only after the soak, and every
// node restored exactly.
func TestRolloutTenNodesInWaves(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	pool, nodes, before := poolNodes(t, c, 10)
	watch := watchService(t, c, nodes)
	soak := 2 * time.Second
	ro := newRollout(t, "waves", nmv1alpha1.NodeMaintenanceRolloutSpec{
		NodeSelector:   &metav1.LabelSelector{MatchLabels: pool.Selector()},
		MaxUnavailable: ptr.To(intstr.FromInt32(3)),
		Step:           stepJob(ns),
		SoakFor:        &metav1.Duration{Duration: soak},
	})
	createRollout(t, c, ro)
	done := waitRollout(t, c, 5*time.Minute, ro.Name, "to succeed", rolloutPhase(nmv1alpha1.RolloutSucceeded))
	watch.done()

	watch.assertAtMostOutOfService(t, 3)
	watch.assertOneMaintenanceEach(t, nodes)
	assertRestoredAll(t, c, before)
	assertRowsInWaves(t, done, nodes, 3)
	assertStepsRanOnDrainedNodes(t, c, ns, done)
	assertSoaked(t, done, 3, soak)
	if done.Status.Done != 10 || done.Status.Total != 10 || done.Status.CompletedAt == nil ||
		!meta.IsStatusConditionTrue(done.Status.Conditions, nmv1alpha1.RolloutConditionCompleted) {
		t.Errorf("status of a finished rollout: %+v", done.Status)
	}
	if left := childrenOf(t, c, ro.Name); len(left) != 0 {
		t.Errorf("%d NodeMaintenances of the rollout are left after it succeeded", len(left))
	}
}

// assertRowsInWaves: the set is the nodes in name order, in waves of size.
func assertRowsInWaves(t *testing.T, ro *nmv1alpha1.NodeMaintenanceRollout, nodes []string, size int) {
	t.Helper()
	for i, row := range ro.Status.Nodes {
		if row.Name != nodes[i] || row.Wave != int32(i/size+1) || row.State != nmv1alpha1.NodeDone {
			t.Errorf("row %d is %s wave %d %s, want %s wave %d Done", i, row.Name, row.Wave, row.State, nodes[i], i/size+1)
		}
	}
}

// assertStepsRanOnDrainedNodes: each node's Job ran its pod on that node,
// created once the node was drained and completed before it was restored.
func assertStepsRanOnDrainedNodes(t *testing.T, c *testcluster.Cluster, ns string, ro *nmv1alpha1.NodeMaintenanceRollout) {
	t.Helper()
	for _, row := range ro.Status.Nodes {
		job := &batchv1.Job{}
		if err := c.Client.Get(bg(), client.ObjectKey{Namespace: ns, Name: row.Job}, job); err != nil {
			t.Errorf("step Job of node %s: %v", row.Name, err)
			continue
		}
		pods := &corev1.PodList{}
		if err := c.Client.List(bg(), pods, client.InNamespace(ns), client.MatchingLabels{"job-name": job.Name}); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) == 0 {
			t.Errorf("step Job %s has no pod", job.Name)
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != row.Name {
				t.Errorf("pod %s of the step of node %s ran on %q", p.Name, row.Name, p.Spec.NodeName)
			}
			if p.Status.StartTime == nil || p.Status.StartTime.Before(row.DrainedAt) || row.RestoredAt.Before(p.Status.StartTime) {
				t.Errorf("pod %s of the step of node %s started at %v, not while the node was drained (%v to %v)", p.Name, row.Name, p.Status.StartTime, row.DrainedAt, row.RestoredAt)
			}
		}
		if row.DrainedAt == nil || job.CreationTimestamp.Before(row.DrainedAt) {
			t.Errorf("step Job of node %s created at %s, before the node was drained (%v)", row.Name, job.CreationTimestamp, row.DrainedAt)
		}
		if job.Status.CompletionTime == nil || row.RestoredAt == nil || row.RestoredAt.Before(job.Status.CompletionTime) {
			t.Errorf("step Job of node %s completed at %v, not before the node was restored (%v)", row.Name, job.Status.CompletionTime, row.RestoredAt)
		}
	}
}

// assertSoaked: each node soaked for soak after its restore, and held its
// slot until then: the k-th node started no earlier than the (k-size)-th
// node to finish.
func assertSoaked(t *testing.T, ro *nmv1alpha1.NodeMaintenanceRollout, size int, soak time.Duration) {
	t.Helper()
	var started, finished []time.Time
	for _, row := range ro.Status.Nodes {
		if row.RestoredAt == nil || row.FinishedAt == nil || row.StartedAt == nil {
			t.Errorf("row %s lacks its times: %+v", row.Name, row)
			return
		}
		if row.FinishedAt.Sub(row.RestoredAt.Time) < soak {
			t.Errorf("node %s restored at %s was done at %s, before soakFor %s", row.Name, row.RestoredAt, row.FinishedAt, soak)
		}
		started, finished = append(started, row.StartedAt.Time), append(finished, row.FinishedAt.Time)
	}
	sort.Slice(started, func(i, j int) bool { return started[i].Before(started[j]) })
	sort.Slice(finished, func(i, j int) bool { return finished[i].Before(finished[j]) })
	for k := size; k < len(started); k++ {
		if started[k].Before(finished[k-size]) {
			t.Errorf("node %d started at %s, before a slot was free (the %d-th node finished at %s)", k+1, started[k], k-size+1, finished[k-size])
		}
	}
}

// A node whose drain times out (onTimeout Fail, a budget at 0) halts the
// rollout: no further node starts, the status names it, the node stays as
// its maintenance left it. Continue with maxFailures 1 goes past it.
func TestRolloutHaltsOnFailedDrainAndContinuesPastIt(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	_, others, before := poolNodes(t, c, 3)
	blocked := deploymentNode(t, c, ns, "held", 1, nil, ptr.To(intstr.FromInt32(0)))
	waitBudget(t, c, ns, "held", 1)
	before[blocked] = settledStateOf(t, c, blocked)
	nodes := []string{others[0], blocked, others[1], others[2]}
	spec := nmv1alpha1.NodeMaintenanceRolloutSpec{
		NodeNames: nodes,
		Drain:     drainTimeoutFail(3 * time.Second),
	}

	halting := newRollout(t, "halt", spec)
	createRollout(t, c, halting)
	halted := waitRollout(t, c, 2*time.Minute, halting.Name, "to halt", rolloutPhase(nmv1alpha1.RolloutHalted))
	if !strings.Contains(halted.Status.Message, blocked) || !meta.IsStatusConditionTrue(halted.Status.Conditions, nmv1alpha1.RolloutConditionHalted) {
		t.Errorf("halted rollout does not name node %s: %q %+v", blocked, halted.Status.Message, halted.Status.Conditions)
	}
	if row := rowOf(halted, blocked); row.State != nmv1alpha1.NodeFailed || !strings.Contains(row.Reason, "timeout") {
		t.Errorf("row of %s: %+v", blocked, row)
	}
	for _, node := range nodes[2:] {
		if row := rowOf(halted, node); row.State != nmv1alpha1.NodeWaiting || row.StartedAt != nil {
			t.Errorf("node %s started after the halt: %+v", node, row)
		}
	}
	if !getNode(t, c, blocked).Spec.Unschedulable || len(childrenOf(t, c, halting.Name)) != 1 {
		t.Errorf("the failed node %s is not left as its maintenance left it (cordoned, its NodeMaintenance there)", blocked)
	}
	deleteRollout(t, c, halting.Name)
	assertRestoredAll(t, c, before)

	spec.OnFailure, spec.MaxFailures = nmv1alpha1.RolloutContinue, ptr.To[int32](1)
	going := newRollout(t, "continue", spec)
	createRollout(t, c, going)
	done := waitRollout(t, c, 3*time.Minute, going.Name, "to succeed past the failure", rolloutPhase(nmv1alpha1.RolloutSucceeded))
	if done.Status.Done != 3 || done.Status.Failed != 1 || rowOf(done, blocked).State != nmv1alpha1.NodeFailed {
		t.Errorf("rollout with Continue: %+v", done.Status)
	}
	assertRestoredAll(t, c, before)
}

// Paused starts no node; unpaused it goes on; paused again, the node in
// progress finishes and the next does not start. Deleted mid-way, it
// restores the node it held.
func TestRolloutPauseResumeAndDelete(t *testing.T) {
	c := testcluster.Get(t)
	_, nodes, before := poolNodes(t, c, 4)
	ro := newRollout(t, "pause", nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: nodes, Paused: true, HoldFor: &metav1.Duration{Duration: 3 * time.Second}})
	createRollout(t, c, ro)
	paused := waitRollout(t, c, time.Minute, ro.Name, "to be paused", func(ro *nmv1alpha1.NodeMaintenanceRollout) bool {
		return ro.Status.Phase == nmv1alpha1.RolloutPaused && len(ro.Status.Nodes) == 4
	})
	for _, row := range paused.Status.Nodes {
		if row.State != nmv1alpha1.NodeWaiting {
			t.Errorf("node %s started while the rollout was paused: %+v", row.Name, row)
		}
	}
	setPaused(t, c, ro.Name, false)
	waitRollout(t, c, time.Minute, ro.Name, "to hold the second node", func(ro *nmv1alpha1.NodeMaintenanceRollout) bool {
		return rowOf(ro, nodes[1]).State == nmv1alpha1.NodeHolding
	})
	setPaused(t, c, ro.Name, true)
	again := waitRollout(t, c, time.Minute, ro.Name, "to finish the second node while paused", func(ro *nmv1alpha1.NodeMaintenanceRollout) bool {
		return ro.Status.Phase == nmv1alpha1.RolloutPaused && rowOf(ro, nodes[1]).State == nmv1alpha1.NodeDone
	})
	if row := rowOf(again, nodes[2]); row.State != nmv1alpha1.NodeWaiting || row.StartedAt != nil {
		t.Errorf("node %s started while the rollout was paused: %+v", nodes[2], row)
	}
	setPaused(t, c, ro.Name, false)
	waitRollout(t, c, time.Minute, ro.Name, "to hold the third node", func(ro *nmv1alpha1.NodeMaintenanceRollout) bool {
		return rowOf(ro, nodes[2]).State == nmv1alpha1.NodeHolding
	})
	if !getNode(t, c, nodes[2]).Spec.Unschedulable {
		t.Fatalf("node %s is held but not cordoned", nodes[2])
	}
	deleteRollout(t, c, ro.Name)
	if left := childrenOf(t, c, ro.Name); len(left) != 0 {
		t.Errorf("%d NodeMaintenances of the deleted rollout are left", len(left))
	}
	assertRestoredAll(t, c, before)
}

func setPaused(t *testing.T, c *testcluster.Cluster, name string, paused bool) {
	t.Helper()
	ro := getRollout(t, c, name)
	patch := client.MergeFrom(ro.DeepCopy())
	ro.Spec.Paused = paused
	if err := c.Client.Patch(bg(), ro, patch); err != nil {
		t.Fatalf("set paused %v on rollout %s: %v", paused, name, err)
	}
}

// The operator stopped mid-rollout and started again: the rollout resumes
// from its status, no node is maintained twice, maxUnavailable is never
// exceeded.
func TestRolloutResumesAfterOperatorRestart(t *testing.T) {
	c := testcluster.Get(t)
	pool, nodes, before := poolNodes(t, c, 6)
	watch := watchService(t, c, nodes)
	ro := newRollout(t, "restart", nmv1alpha1.NodeMaintenanceRolloutSpec{
		NodeSelector:   &metav1.LabelSelector{MatchLabels: pool.Selector()},
		MaxUnavailable: ptr.To(intstr.FromString("34%")), // 2 of 6
		HoldFor:        &metav1.Duration{Duration: 2 * time.Second},
		SoakFor:        &metav1.Duration{Duration: time.Second},
	})
	createRollout(t, c, ro)
	waitRollout(t, c, 2*time.Minute, ro.Name, "to have nodes done and in progress", func(ro *nmv1alpha1.NodeMaintenanceRollout) bool {
		return ro.Status.Done >= 1 && ro.Status.InProgress >= 1
	})
	restartOperatorNow(t, c)
	done := waitRollout(t, c, 3*time.Minute, ro.Name, "to succeed after the restart", rolloutPhase(nmv1alpha1.RolloutSucceeded))
	watch.done()
	assertSoaked(t, done, 2, time.Second)
	watch.assertAtMostOutOfService(t, 2)
	watch.assertOneMaintenanceEach(t, nodes)
	assertRestoredAll(t, c, before)
}

// The operator binary SIGKILLed three times at random points of a rollout
// and started again each time: the rollout resumes from its status, no node
// is maintained twice, maxUnavailable is never exceeded.
func TestRolloutResumesAfterOperatorKilled(t *testing.T) {
	c := testcluster.Get(t)
	pool, nodes, before := poolNodes(t, c, 6)
	p := runOperatorProcess(t, c)
	watch := watchService(t, c, nodes)
	ro := newRollout(t, "killed", nmv1alpha1.NodeMaintenanceRolloutSpec{
		NodeSelector:   &metav1.LabelSelector{MatchLabels: pool.Selector()},
		MaxUnavailable: ptr.To(intstr.FromInt32(2)),
		HoldFor:        &metav1.Duration{Duration: 3 * time.Second},
		SoakFor:        &metav1.Duration{Duration: time.Second},
	})
	createRollout(t, c, ro)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("kill points from seed %d", seed)
	for i := 1; i <= 3; i++ {
		time.Sleep(time.Duration(rng.Int64N(int64(3 * time.Second)))) // a kill point, not an assertion
		if got := getRollout(t, c, ro.Name); got.Status.Phase == nmv1alpha1.RolloutSucceeded {
			t.Fatalf("the rollout ended before kill %d: the scenario must be slower", i)
		}
		p.Kill()
		if err := p.Start(c, processFlags...); err != nil {
			t.Fatalf("restart %d of the operator: %v", i, err)
		}
	}
	done := waitRollout(t, c, 3*time.Minute, ro.Name, "to succeed after the kills", rolloutPhase(nmv1alpha1.RolloutSucceeded))
	watch.done()
	assertSoaked(t, done, 2, time.Second)
	watch.assertAtMostOutOfService(t, 2)
	watch.assertOneMaintenanceEach(t, nodes)
	assertRestoredAll(t, c, before)
}

// A node held by someone else's NodeMaintenance counts toward
// maxUnavailable and waits, its row naming that maintenance; it is taken
// once that maintenance is gone.
func TestRolloutWaitsForSomeoneElsesMaintenance(t *testing.T) {
	c := testcluster.Get(t)
	_, nodes, before := poolNodes(t, c, 3)
	theirs := testcluster.UniqueName(t, "theirs")
	createMaintenance(t, c, theirs, nodes[1], "someone else's")
	waitPhase(t, c, theirs, nmv1beta1.MaintenanceSucceeded)
	watch := watchService(t, c, nodes)
	ro := newRollout(t, "others", nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: nodes, MaxUnavailable: ptr.To(intstr.FromInt32(2))})
	createRollout(t, c, ro)
	waiting := waitRollout(t, c, 2*time.Minute, ro.Name, "to go past the held node", func(ro *nmv1alpha1.NodeMaintenanceRollout) bool {
		return rowOf(ro, nodes[0]).State == nmv1alpha1.NodeDone && rowOf(ro, nodes[2]).State == nmv1alpha1.NodeDone
	})
	if row := rowOf(waiting, nodes[1]); row.State != nmv1alpha1.NodeWaiting || row.WaitingFor != theirs {
		t.Errorf("row of the held node %s: %+v, want Waiting for %s", nodes[1], row, theirs)
	}
	if first, third := rowOf(waiting, nodes[0]), rowOf(waiting, nodes[2]); third.StartedAt.Before(first.FinishedAt) {
		t.Errorf("node %s started at %s, before the first node's slot was free (%s): the held node did not count", nodes[2], third.StartedAt, first.FinishedAt)
	}
	deleteMaintenance(t, c, theirs)
	waitRollout(t, c, 2*time.Minute, ro.Name, "to succeed", rolloutPhase(nmv1alpha1.RolloutSucceeded))
	watch.done()
	watch.assertAtMostOutOfService(t, 2)
	assertRestoredAll(t, c, before)
}

// A node of the set cordoned by hand before the rollout is out of service
// already: it is maintained at once, even when that goes past the free
// slots, given back cordoned as it was, and keeps its slot; the others
// never take the set beyond maxUnavailable.
func TestRolloutMaintainsANodeCordonedByHand(t *testing.T) {
	c := testcluster.Get(t)
	_, nodes, before := poolNodes(t, c, 3)
	setUnschedulable(t, c, nodes[1], true)
	// kube-controller-manager taints a cordoned node: its state settles
	// with that taint.
	testcluster.WaitFor(t, time.Minute, "node "+nodes[1]+" tainted unschedulable", func(context.Context) (bool, error) {
		return slices.ContainsFunc(getNode(t, c, nodes[1]).Spec.Taints, func(tt corev1.Taint) bool { return tt.Key == corev1.TaintNodeUnschedulable }), nil
	})
	before[nodes[1]] = stateOf(t, c, nodes[1])
	watch := watchService(t, c, nodes)
	ro := newRollout(t, "byhand", nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: nodes, MaxUnavailable: ptr.To(intstr.FromInt32(2)),
		HoldFor: &metav1.Duration{Duration: 2 * time.Second}})
	createRollout(t, c, ro)
	done := waitRollout(t, c, 2*time.Minute, ro.Name, "phase Succeeded", rolloutPhase(nmv1alpha1.RolloutSucceeded))
	watch.done()
	watch.assertAtMostOutOfService(t, 2)
	watch.assertOneMaintenanceEach(t, nodes)
	first, byHand, last := rowOf(done, nodes[0]), rowOf(done, nodes[1]), rowOf(done, nodes[2])
	if byHand.State != nmv1alpha1.NodeDone || byHand.StartedAt.After(first.StartedAt.Time) {
		t.Errorf("the node cordoned by hand, %s: %+v; want Done, started with the first node (%s)", nodes[1], byHand, first.StartedAt)
	}
	if last.StartedAt.Before(first.FinishedAt) {
		t.Errorf("node %s started at %s, before the first node's slot was free (%s)", nodes[2], last.StartedAt, first.FinishedAt)
	}
	assertRestoredAll(t, c, before)
	setUnschedulable(t, c, nodes[1], false)
}

// restartOperatorNow stops the package operator and starts it again.
func restartOperatorNow(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	operator.Stop()
	var err error
	if operator, err = testoperator.Start(c, defaultOptions()); err != nil {
		t.Fatalf("start the operator again: %v", err)
	}
}

// drainTimeoutFail is a drain that fails after timeout, leaving its node
// cordoned.
func drainTimeoutFail(timeout time.Duration) *nmv1beta1.DrainPolicy {
	return &nmv1beta1.DrainPolicy{Timeout: &metav1.Duration{Duration: timeout}, OnTimeout: nmv1beta1.DrainTimeoutFail}
}
