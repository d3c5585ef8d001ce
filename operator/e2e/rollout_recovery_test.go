package e2e

// The recovery gate: a restored node's slot goes to the next node only once
// the workloads evicted from it are fully available again, at most
// recoveryTimeout; recoveryGate NodeReady waits for the node alone.

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// A Deployment whose replacement pods cannot be scheduled anywhere holds
// the next node until recoveryTimeout; then the rollout halts, naming the
// node and the Deployment, and the second node never starts.
func TestRolloutRecoveryTimeoutHaltsNamingTheDeployment(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	first, second, before := unplaceableDeployment(t, c, ns, "web")
	timeout := 20 * time.Second
	ro := newRollout(t, "recovery", nmv1alpha1.NodeMaintenanceRolloutSpec{
		NodeNames:       []string{first, second},
		RecoveryTimeout: &metav1.Duration{Duration: timeout},
	})
	createRollout(t, c, ro)
	web := "Deployment " + ns + "/web"

	waiting := waitRollout(t, c, 2*time.Minute, ro.Name, "to wait for "+web, func(ro *nmv1alpha1.NodeMaintenanceRollout) bool {
		row := rowOf(ro, first)
		return row.State == nmv1alpha1.NodeRecovering && len(row.WaitingForWorkloads) == 1 && len(ro.Status.Blockers) == 1
	})
	row := rowOf(waiting, first)
	if strings.Join(row.Workloads, ",") != web || row.WaitingForWorkloads[0] != web+": 0 of 1 available" {
		t.Errorf("row of %s records %q and waits for %q; want %s, 0 of 1 available", first, row.Workloads, row.WaitingForWorkloads, web)
	}
	if !strings.Contains(waiting.Status.Blockers[0], "node "+first) || !strings.Contains(waiting.Status.Blockers[0], web) ||
		!strings.Contains(waiting.Status.Message, "the next node waits: node "+first) {
		t.Errorf("blockers %q, message %q: want them naming node %s and %s", waiting.Status.Blockers, waiting.Status.Message, first, web)
	}
	if next := rowOf(waiting, second); next.State != nmv1alpha1.NodeWaiting || waiting.Status.InProgress != 1 {
		t.Errorf("while %s recovers: next row %+v, %d in progress; want the next Waiting and the recovering node holding its slot", first, next, waiting.Status.InProgress)
	}

	halted := waitRollout(t, c, 2*time.Minute, ro.Name, "to halt", rolloutPhase(nmv1alpha1.RolloutHalted))
	failed := rowOf(halted, first)
	want := "workloads not recovered within recoveryTimeout 20s: " + web + ": 0 of 1 available"
	if failed.State != nmv1alpha1.NodeFailed || !strings.Contains(failed.Reason, want) || !strings.Contains(halted.Status.Message, "node "+first+" failed: "+want) {
		t.Errorf("row %+v, message %q; want the row Failed and the message naming node %s and: %s", failed, halted.Status.Message, first, want)
	}
	if failed.FinishedAt == nil || failed.RestoredAt == nil || failed.FinishedAt.Sub(failed.RestoredAt.Time) < timeout {
		t.Errorf("node %s restored at %v failed at %v, before recoveryTimeout %s", first, failed.RestoredAt, failed.FinishedAt, timeout)
	}
	if next := rowOf(halted, second); next.State != nmv1alpha1.NodeWaiting || next.StartedAt != nil {
		t.Errorf("node %s started although the recovery of %s failed: %+v", second, first, next)
	}
	deleteRollout(t, c, ro.Name)
	assertRestoredAll(t, c, before)
}

// Workloads evicted from the first node come back available on other
// nodes, and only then does the second node start: by the rows' times, and
// by a watch of the Deployment, which sees it fall short after the
// eviction and whole again no later than the second node's start.
func TestRolloutStartsTheNextNodeOnceTheWorkloadsRecovered(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	pool := c.NewPool(t)
	first := pool.AddNode(t, "").Name
	d := c.CreateDeployment(t, ns, "web", 2, pool.Selector())
	// Available only 8 s after Ready: the recovery outlasts the restore.
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.MinReadySeconds = 8
	if err := c.Client.Patch(bg(), d, patch); err != nil {
		t.Fatal(err)
	}
	c.WaitRunningPods(t, ns, "web", first, 2)
	second, spare := pool.AddNode(t, "").Name, pool.AddNode(t, "").Name
	before := map[string]nodeState{first: settledStateOf(t, c, first), second: settledStateOf(t, c, second), spare: settledStateOf(t, c, spare)}
	waitDeploymentAvailable(t, c, ns, "web", 2)
	history := watchAvailability(t, c, ns, "web")
	ro := newRollout(t, "recovered", nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: []string{first, second}})
	createRollout(t, c, ro)
	done := waitRollout(t, c, 3*time.Minute, ro.Name, "to succeed", rolloutPhase(nmv1alpha1.RolloutSucceeded))

	one, two := rowOf(done, first), rowOf(done, second)
	web := "Deployment " + ns + "/web"
	if strings.Join(one.Workloads, ",") != web || one.WaitingForWorkloads != nil {
		t.Errorf("row of %s records %q, still waits for %q; want %s recorded, nothing waited for", first, one.Workloads, one.WaitingForWorkloads, web)
	}
	if one.RecoveredAt == nil || one.RestoredAt == nil || one.RecoveredAt.Before(one.RestoredAt) {
		t.Fatalf("row of %s: restored at %v, recovered at %v", first, one.RestoredAt, one.RecoveredAt)
	}
	if two.StartedAt == nil || two.StartedAt.Before(one.RecoveredAt) {
		t.Errorf("node %s started at %v, before the workloads of %s recovered (%v)", second, two.StartedAt, first, one.RecoveredAt)
	}
	var short, whole time.Time
	testcluster.WaitFor(t, time.Minute, "the watch to see Deployment web fall short after node "+first+" started, and come back", func(context.Context) (bool, error) {
		short, whole = history.recoveredAfter(one.StartedAt.Time)
		return !whole.IsZero(), nil
	})
	// Stamps are to the second: the node started no earlier than its stamp.
	if whole.After(two.StartedAt.Add(time.Second)) {
		t.Errorf("node %s started at %s, before Deployment web was whole again at %s", second, two.StartedAt, whole.Format(time.StampMilli))
	}
	t.Logf("node %s restored at %s, web short at %s and whole at %s, recovered at %s; node %s started at %s", first, one.RestoredAt,
		short.Format(time.StampMilli), whole.Format(time.StampMilli), one.RecoveredAt, second, two.StartedAt)
	assertRestoredAll(t, c, before)
}

// recoveryGate NodeReady does not wait for the workloads: the same
// Deployment that cannot be placed again does not hold the rollout.
func TestRolloutRecoveryGateNodeReadyDoesNotWaitForWorkloads(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	first, second, before := unplaceableDeployment(t, c, ns, "web")
	ro := newRollout(t, "nodeready", nmv1alpha1.NodeMaintenanceRolloutSpec{
		NodeNames:       []string{first, second},
		RecoveryGate:    nmv1alpha1.RecoveryNodeReady,
		RecoveryTimeout: &metav1.Duration{Duration: 20 * time.Second},
	})
	createRollout(t, c, ro)
	done := waitRollout(t, c, 2*time.Minute, ro.Name, "to succeed", rolloutPhase(nmv1alpha1.RolloutSucceeded))
	one := rowOf(done, first)
	if one.State != nmv1alpha1.NodeDone || one.RecoveredAt == nil || one.WaitingForWorkloads != nil || done.Status.Done != 2 {
		t.Errorf("rollout with recoveryGate NodeReady: %+v", done.Status)
	}
	if strings.Join(one.Workloads, ",") != "Deployment "+ns+"/web" {
		t.Errorf("row of %s records %q, want the Deployment all the same", first, one.Workloads)
	}
	dep := &appsv1.Deployment{}
	if err := c.Client.Get(bg(), client.ObjectKey{Namespace: ns, Name: "web"}, dep); err != nil {
		t.Fatal(err)
	}
	if dep.Status.AvailableReplicas != 0 {
		t.Errorf("Deployment web has %d available replicas: the test meant it to stay unavailable", dep.Status.AvailableReplicas)
	}
	assertRestoredAll(t, c, before)
}

// unplaceableDeployment runs one pod of Deployment app on a new node
// (first), then takes away the label its node selector needs, so that
// once evicted its replacement fits no node, even first restored. It adds
// a second node and returns both, with their states.
func unplaceableDeployment(t *testing.T, c *testcluster.Cluster, ns, app string) (first, second string, before map[string]nodeState) {
	t.Helper()
	pool := c.NewPool(t)
	key := "nodemaintenance.test/recovery"
	labels := map[string]string{key: pool.Value}
	for k, v := range pool.Selector() {
		labels[k] = v
	}
	first = c.AddNode(t, testcluster.UniqueName(t, "node"), labels).Name
	c.CreateDeployment(t, ns, app, 1, map[string]string{key: pool.Value})
	c.WaitRunningPods(t, ns, app, first, 1)
	n := getNode(t, c, first)
	patch := client.MergeFrom(n.DeepCopy())
	delete(n.Labels, key)
	if err := c.Client.Patch(bg(), n, patch); err != nil {
		t.Fatalf("take label %s off node %s: %v", key, first, err)
	}
	second = pool.AddNode(t, "").Name
	return first, second, map[string]nodeState{first: settledStateOf(t, c, first), second: settledStateOf(t, c, second)}
}

// waitDeploymentAvailable waits until the Deployment has want available replicas.
func waitDeploymentAvailable(t *testing.T, c *testcluster.Cluster, ns, name string, want int32) {
	t.Helper()
	testcluster.WaitFor(t, time.Minute, "Deployment "+ns+"/"+name+" to be available", func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return false, err
		}
		return d.Status.AvailableReplicas == want, nil
	})
}

// availabilityWatch records when a Deployment was fully available (as many
// available and updated replicas as it wants) and when not.
type availabilityWatch struct {
	mu       sync.Mutex
	changes  []availabilityChange
	stop     context.CancelFunc
	finished chan struct{}
}

type availabilityChange struct {
	at    time.Time
	whole bool
}

func watchAvailability(t *testing.T, c *testcluster.Cluster, ns, name string) *availabilityWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(bg())
	w := &availabilityWatch{stop: cancel, finished: make(chan struct{})}
	watcher, err := c.Clientset.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(w.finished)
		defer watcher.Stop()
		for ev := range watcher.ResultChan() {
			if d, ok := ev.Object.(*appsv1.Deployment); ok {
				want := ptr.Deref(d.Spec.Replicas, 1)
				whole := d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas >= want && d.Status.UpdatedReplicas >= want
				w.mu.Lock()
				w.changes = append(w.changes, availabilityChange{time.Now(), whole})
				w.mu.Unlock()
			}
		}
	}()
	t.Cleanup(w.done)
	return w
}

func (w *availabilityWatch) done() {
	w.stop()
	<-w.finished
}

// recoveredAfter is when the Deployment was first seen short after since,
// and when it was next seen whole; zero when not seen.
func (w *availabilityWatch) recoveredAfter(since time.Time) (short, whole time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.changes {
		switch {
		case ch.at.Before(since):
		case short.IsZero() && !ch.whole:
			short = ch.at
		case !short.IsZero() && ch.whole:
			return short, ch.at
		}
	}
	return short, time.Time{}
}
