package main

import (
	"bytes"
	"context"
	"maps"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// The example's Rollout program over three nodes picked by a label, two at a
// time, with step-job.yaml as the step (kwok completes the Job's pod): up
// returns once the rollout Succeeded, with every node cordoned and tainted
// at some point, never more than two at once, its step Job pinned to it and
// completed, and every node back exactly as it was; refresh and a second up
// find nothing to change; destroy deletes the rollout and leaves the nodes
// as they were.
func TestAutomationAPIGoSDKRollout(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	pool := c.NewPool(t)
	var nodes []string
	before := map[string]nodeState{}
	for range 3 {
		node := pool.AddNode(t, "").Name
		addForeignTaintAndLabel(t, c, node)
		nodes = append(nodes, node)
	}
	for _, node := range nodes {
		before[node] = settledStateOf(t, c, node)
	}
	template, err := os.ReadFile("step-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := Rollout{
		Name:           testcluster.UniqueName(t, "patch"),
		Selector:       testcluster.PoolLabel + "=" + pool.Value,
		MaxUnavailable: "2",
		SoakFor:        "1s",
		Reason:         "kernel upgrade (Automation API)",
		Step:           &Step{Namespace: ns, JobTemplate: string(template), Timeout: "2m"},
		// A window open all week, in a zone of its own: the nodes start now.
		Window:          &Window{Days: []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}, Start: "00:00", End: "00:00", TimeZone: "Asia/Tokyo"},
		RecoveryTimeout: "2m",
		Create:          "4m",
		Update:          "4m",
		Delete:          "2m",
	}
	stack := newStack(t, c, r.Program)
	seen := watchMaintained(t, c, pool.Value)

	ctx, cancel := context.WithTimeout(context.Background(), 3*pulumiTimeout)
	defer cancel()
	var out bytes.Buffer
	logged := func(op string, start time.Time) {
		t.Helper()
		t.Logf("%s (%s):\n%s", op, time.Since(start).Round(100*time.Millisecond), out.String())
		out.Reset()
	}

	start := time.Now()
	up, err := stack.Up(ctx, optup.ProgressStreams(&out))
	logged("up", start)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	// Numbers come back from the engine as JSON numbers (float64).
	for output, want := range map[string]any{"name": r.Name, "phase": "Succeeded", "total": 3.0, "done": 3.0, "failed": 0.0} {
		if got := up.Outputs[output].Value; got != want {
			t.Errorf("up exported %s = %v (%T), want %v", output, got, got, want)
		}
	}
	var rollout nmv1alpha1.NodeMaintenanceRollout
	if err := c.Client.Get(ctx, client.ObjectKey{Name: r.Name}, &rollout); err != nil {
		t.Fatalf("the rollout the program created: %v", err)
	}
	assertStepJobsRan(t, c, ns, rollout)
	cordoned, maxAtOnce := seen()
	for _, node := range nodes {
		if !cordoned[node] {
			t.Errorf("node %s was never seen cordoned with the %s taint during up", node, drainTaint)
		}
		if after := stateOf(getNode(t, c, node)); !reflect.DeepEqual(before[node], after) {
			t.Errorf("node %s is not restored exactly after up:\nbefore %+v\nafter  %+v", node, before[node], after)
		}
	}
	if maxAtOnce > 2 {
		t.Errorf("%d nodes of the set were cordoned at once, max_unavailable is 2", maxAtOnce)
	}
	assertNoPluginLeft(t)

	start = time.Now()
	_, err = stack.Refresh(ctx, optrefresh.ExpectNoChanges(), optrefresh.ProgressStreams(&out))
	logged("refresh", start)
	if err != nil {
		t.Fatalf("refresh found changes or failed: %v", err)
	}
	start = time.Now()
	again, err := stack.Up(ctx, optup.ExpectNoChanges(), optup.ProgressStreams(&out))
	logged("up again", start)
	if err != nil {
		t.Fatalf("up again found changes or failed: %v", err)
	}
	if changed := changes(again.Summary.ResourceChanges); len(changed) > 0 {
		t.Errorf("up again changed the stack: %v", changed)
	}
	assertNoPluginLeft(t)

	start = time.Now()
	_, err = stack.Destroy(ctx, optdestroy.ProgressStreams(&out))
	logged("destroy", start)
	if err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: r.Name}, &nmv1alpha1.NodeMaintenanceRollout{}); !apierrors.IsNotFound(err) {
		t.Errorf("rollout %s should be gone after destroy, got %v", r.Name, err)
	}
	var children nmv1beta1.NodeMaintenanceList
	if err := c.Client.List(ctx, &children, client.MatchingLabels{nmv1alpha1.RolloutLabel: r.Name}); err != nil {
		t.Fatal(err)
	}
	if len(children.Items) > 0 {
		t.Errorf("%d NodeMaintenances of rollout %s are left after destroy", len(children.Items), r.Name)
	}
	for _, node := range nodes {
		if after := stateOf(getNode(t, c, node)); !reflect.DeepEqual(before[node], after) {
			t.Errorf("node %s is not as it was after destroy:\nbefore %+v\nafter  %+v", node, before[node], after)
		}
	}
	assertNoPluginLeft(t)
}

// watchMaintained watches the nodes of a pool until the test ends. seen
// returns the nodes it saw cordoned with the drain taint, and the most nodes
// cordoned at once.
func watchMaintained(t *testing.T, c *testcluster.Cluster, pool string) (seen func() (map[string]bool, int)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Clientset.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{LabelSelector: testcluster.PoolLabel + "=" + pool})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	var mu sync.Mutex
	maintained, down, maxDown := map[string]bool{}, map[string]bool{}, 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			mu.Lock()
			down[n.Name] = ev.Type != watch.Deleted && n.Spec.Unschedulable
			if down[n.Name] && hasTaint(n, drainTaint) {
				maintained[n.Name] = true
			}
			count := 0
			for _, d := range down {
				if d {
					count++
				}
			}
			maxDown = max(maxDown, count)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return func() (map[string]bool, int) {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(maintained), maxDown
	}
}

// assertStepJobsRan checks that every node of a rollout is Done, in order
// (drained, then its step finished, then restored), and that its step Job
// was pinned to it and completed.
func assertStepJobsRan(t *testing.T, c *testcluster.Cluster, ns string, rollout nmv1alpha1.NodeMaintenanceRollout) {
	t.Helper()
	var jobs batchv1.JobList
	if err := c.Client.List(context.Background(), &jobs, client.InNamespace(ns), client.MatchingLabels{nmv1alpha1.RolloutLabel: rollout.Name}); err != nil {
		t.Fatal(err)
	}
	byName := map[string]batchv1.Job{}
	for _, job := range jobs.Items {
		byName[job.Name] = job
	}
	for _, row := range rollout.Status.Nodes {
		if row.State != nmv1alpha1.NodeDone {
			t.Errorf("node %s is %s in the rollout's status, want %s (%s)", row.Name, row.State, nmv1alpha1.NodeDone, row.Reason)
			continue
		}
		if row.DrainedAt == nil || row.StepFinishedAt == nil || row.RestoredAt == nil ||
			row.StepFinishedAt.Before(row.DrainedAt) || row.RestoredAt.Before(row.StepFinishedAt) {
			t.Errorf("node %s: drained at %v, step finished at %v, restored at %v: want all three, in this order", row.Name, row.DrainedAt, row.StepFinishedAt, row.RestoredAt)
		}
		job, ok := byName[row.Job]
		switch {
		case !ok:
			t.Errorf("node %s: its step Job %q is not in namespace %s", row.Name, row.Job, ns)
		case job.Spec.Template.Spec.NodeName != row.Name:
			t.Errorf("node %s: its step Job %s is pinned to %q", row.Name, job.Name, job.Spec.Template.Spec.NodeName)
		case job.Status.Succeeded != 1:
			t.Errorf("node %s: its step Job %s has %d succeeded pods, want 1", row.Name, job.Name, job.Status.Succeeded)
		}
	}
	if len(rollout.Status.Nodes) != int(rollout.Status.Total) {
		t.Errorf("the rollout's status has %d rows for %d nodes", len(rollout.Status.Nodes), rollout.Status.Total)
	}
}
