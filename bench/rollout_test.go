package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// P7: a NodeMaintenanceRollout of 40 nodes × 10 pods at maxUnavailable 10,
// no step, no hold, no soak: the time until it is Succeeded (every node
// drained and restored), against the limit loop doing the same waves, one
// after the other: drain 10 nodes at once, uncordon them, next 10.
func BenchmarkP7(b *testing.B) {
	const nodes, pods, maxUnavailable = 40, 10, 10
	c := testcluster.Get(b)
	w := watchClient(b, c)
	var rollouts, loops []time.Duration
	for i := range runs {
		eachRun(b, fmt.Sprintf("P7/run%d", i), func(t testing.TB) {
			ns := c.Namespace(t)
			rollouts = append(rollouts, rolloutDrain(t, c, w, prepareNodes(t, c, ns, nodes, pods, 0), maxUnavailable))
			loops = append(loops, limitWaves(t, c, prepareNodes(t, c, ns, nodes, pods, 0), maxUnavailable))
		})
	}
	r, l := Seconds(rollouts), Seconds(loops)
	waves := (nodes + maxUnavailable - 1) / maxUnavailable
	record(
		Row{Scenario: "P7", Side: fmt.Sprintf("limit loop, %d waves of %d nodes, each drained and uncordoned", waves, maxUnavailable), Sample: l},
		Row{Scenario: "P7", Side: fmt.Sprintf("operator, rollout of %d nodes × %d pods at maxUnavailable %d", nodes, pods, maxUnavailable),
			Sample: r, Ratio: r.Median() / l.Median(), Of: "P7 limit loop", Max: 1.3},
	)
	b.ReportMetric(r.Median(), "rollout-succeeded-s")
	b.ReportMetric(l.Median(), "limit-waves-s")
}

// rolloutDrain creates a rollout of nodes and returns the time until a
// watch sees it Succeeded; then it deletes it and waits until it is gone
// (not timed).
func rolloutDrain(t testing.TB, c *testcluster.Cluster, w client.WithWatch, nodes []string, maxUnavailable int) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	runCounter++
	r := &nmv1alpha1.NodeMaintenanceRollout{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-r%d-%d", os.Getpid(), runCounter)},
		Spec: nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: nodes, Reason: "benchmark",
			MaxUnavailable: ptr.To(intstr.FromInt32(int32(maxUnavailable)))},
	}
	watcher, err := w.Watch(ctx, &nmv1alpha1.NodeMaintenanceRolloutList{}, client.MatchingFields{"metadata.name": r.Name})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	start := time.Now()
	if err := c.Client.Create(ctx, r); err != nil {
		t.Fatalf("create NodeMaintenanceRollout %s: %v", r.Name, err)
	}
	t.Cleanup(func() {
		_ = c.Client.Delete(context.Background(), r)
		testcluster.WaitFor(t, 5*time.Minute, "rollout "+r.Name+" to go", func(ctx context.Context) (bool, error) {
			err := c.Client.Get(ctx, client.ObjectKeyFromObject(r), &nmv1alpha1.NodeMaintenanceRollout{})
			return client.IgnoreNotFound(err) == nil && err != nil, nil
		})
	})
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("rollout %s not Succeeded before the deadline", r.Name)
		case ev, ok := <-watcher.ResultChan():
			if !ok {
				t.Fatal("the rollout watch ended")
			}
			got, ok := ev.Object.(*nmv1alpha1.NodeMaintenanceRollout)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			switch got.Status.Phase {
			case nmv1alpha1.RolloutSucceeded:
				lastDrain = span{start: start, end: time.Now()}
				return lastDrain.end.Sub(start)
			case nmv1alpha1.RolloutHalted:
				t.Fatalf("rollout %s Halted: %s", r.Name, got.Status.Message)
			}
		}
	}
}

// limitWaves runs the limit loop on nodes a wave at a time: a wave's nodes
// drained at once, then uncordoned, before the next wave starts.
func limitWaves(t testing.TB, c *testcluster.Cluster, nodes []string, size int) time.Duration {
	t.Helper()
	var total time.Duration
	for from := 0; from < len(nodes); from += size {
		wave := nodes[from:min(from+size, len(nodes))]
		start := time.Now()
		limitDrainAll(t, c, wave)
		for _, n := range wave {
			uncordon(t, c, n)
		}
		// limitDrainAll's watch set-up is not timed: only the waves are.
		total += time.Since(start)
	}
	return total
}
