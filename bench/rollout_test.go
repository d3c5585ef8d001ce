package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	rolloutvalidation "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// p7Pods is the pods of each node of P7; p7MaxUnavailable its rollout's
// maxUnavailable, a percentage of the set.
const (
	p7Pods           = 10
	p7MaxUnavailable = "10%"
)

// P7's first rollout of at least p7ProfileNodes nodes saves p7ProfileSeconds
// of CPU profile of the operator and the API server, p7ProfileAfter into
// it (a rollout of 500 nodes takes minutes).
const (
	p7ProfileNodes   = 200
	p7ProfileAfter   = time.Minute
	p7ProfileSeconds = 30
)

// p7TraceNodes is the largest rollout whose every request BENCH_TRACE lists
// (p7-trace.txt), in the order the API server received them: how one node's
// maintenance goes from the rollout's start to its child's restore, to the
// millisecond. A larger one gets only the totals (p7-requests.txt).
const p7TraceNodes = 40

// cpuSpent says how many CPU seconds each process of cpuProcesses used
// between two readings of cpuByProcess.
func cpuSpent(before, after map[string]float64) string {
	parts := make([]string, 0, len(cpuProcesses))
	for _, name := range cpuProcesses {
		parts = append(parts, fmt.Sprintf("%s %.1f", name, after[name]-before[name]))
	}
	return "CPU seconds used: " + strings.Join(parts, ", ")
}

// p7Controllers are the operator's controllers whose passes P7 reports.
var p7Controllers = []string{"nodemaintenancerollout", "nodemaintenance"}

// passCount is how many passes a controller has run, and the seconds they
// took in all.
type passCount struct{ passes, seconds float64 }

// passesOf reads the passCount of each of p7Controllers; nil when the
// metrics cannot be read.
func passesOf(t testing.TB) map[string]passCount {
	out := map[string]passCount{}
	for _, name := range p7Controllers {
		n, s, err := op.reconciles(name)
		if err != nil {
			t.Logf("the passes of controller %s: %v", name, err)
			return nil
		}
		out[name] = passCount{n, s}
	}
	return out
}

// passesSince says how many passes each controller ran since before, and
// how long they took on average.
func passesSince(t testing.TB, before map[string]passCount) string {
	after := passesOf(t)
	if before == nil || after == nil {
		return "passes: not read"
	}
	parts := make([]string, 0, len(p7Controllers))
	for _, name := range p7Controllers {
		n, s := after[name].passes-before[name].passes, after[name].seconds-before[name].seconds
		avg := 0.0
		if n > 0 {
			avg = s / n
		}
		parts = append(parts, fmt.Sprintf("%s %.0f passes, %.1f s in all, %.0f ms each on average", name, n, s, 1000*avg))
	}
	return "passes: " + strings.Join(parts, "; ")
}

// p7 holds P7's figures across runs.
type p7 struct {
	rollouts, loops []time.Duration
	perPod, peakMB  []float64
}

// P7: a NodeMaintenanceRollout of BENCH_P7_NODES (500) nodes × 10 pods at
// maxUnavailable 10% (50 nodes at once), no step, no hold, no soak: the
// time until it is Succeeded (every node drained and restored), against
// the limit loop doing the same waves one after the other: drain 50 nodes
// at once, uncordon them, next 50. Each side drains a fleet of its own,
// freshly prepared (prepareFleet) and removed before the other side's; the
// sides take turns going first. For the rollout it also reports the
// operator's API requests per evicted pod over the whole rollout, and the
// peak RSS of an operator process started just before the rollout's fleet
// is prepared.
func BenchmarkP7(b *testing.B) {
	nodes := envInt("BENCH_P7_NODES", 500)
	mu := intstr.FromString(p7MaxUnavailable)
	wave, err := rolloutvalidation.MaxUnavailableNodes(&mu, nodes)
	if err != nil {
		b.Fatalf("maxUnavailable %s of %d nodes: %v", p7MaxUnavailable, nodes, err)
	}
	c := testcluster.Get(b)
	w := watchClient(b, c)
	bulk := bulkClient(b, c)
	var res p7
	for i := range runs {
		sides := []func(){
			func() {
				eachRun(b, fmt.Sprintf("P7/run%d/rollout", i), func(t testing.TB) {
					// A fresh process: its peak memory is the rollout's.
					if err := op.restart(c); err != nil {
						t.Fatalf("restart the operator: %v", err)
					}
					res.rollout(t, c, w, prepareFleet(t, c, bulk, nodes, p7Pods), mu, wave)
				})
			},
			func() {
				eachRun(b, fmt.Sprintf("P7/run%d/limit", i), func(t testing.TB) {
					fleet := prepareFleet(t, c, bulk, nodes, p7Pods)
					d, spent := limitWaves(t, bulk, fleet, wave)
					res.loops = append(res.loops, d)
					summary := fmt.Sprintf("limit loop's %d waves of %d nodes, back to back: %s\n  %s", (nodes+wave-1)/wave, wave, d.Round(time.Millisecond), spent)
					t.Log(summary)
					appendResult(t, "p7-rows.txt", summary+"\n")
				})
			},
		}
		for k := range sides {
			sides[(i+k)%len(sides)]()
		}
	}
	res.record(b, nodes, wave)
}

// rollout measures one rollout of nodes: its time, the operator's API
// requests per evicted pod over it, and the operator's peak RSS.
func (p *p7) rollout(t testing.TB, c *testcluster.Cluster, w client.WithWatch, nodes []string, mu intstr.IntOrString, wave int) {
	t.Helper()
	before, err := op.requests()
	if err != nil {
		t.Fatalf("the operator's API requests before the rollout: %v", err)
	}
	profiled := make(chan struct{})
	if dir := resultsDir(); dir != "" && len(p.rollouts) == 0 && len(nodes) >= p7ProfileNodes {
		// Where the CPU of a rollout in full swing goes: the operator's
		// and the API server's profiles, once the first nodes are done.
		go func() {
			defer close(profiled)
			time.Sleep(p7ProfileAfter)
			saveCPUProfiles(t, c, dir, "p7", p7ProfileSeconds)
		}()
	} else {
		close(profiled)
	}
	cpu := cpuByProcess(t)
	work := passesOf(t)
	d, done := rolloutDrain(t, c, w, nodes, mu)
	spent := cpuSpent(cpu, cpuByProcess(t))
	passes := passesSince(t, work)
	<-profiled
	after, err := op.requests()
	if err != nil {
		t.Fatalf("the operator's API requests after the rollout: %v", err)
	}
	peak, err := op.peakRSSMB()
	if err != nil {
		t.Fatalf("the operator's peak RSS: %v", err)
	}
	if tracing {
		writeRequestTotals(t, c, "p7-requests.txt", fmt.Sprintf("rollout of %d nodes × %d pods, %.0f operator requests", len(nodes), p7Pods, after-before), lastDrain)
		if len(nodes) <= p7TraceNodes {
			writeTrace(t, c, "p7-trace.txt", lastDrain)
		}
	}
	summary := fmt.Sprintf("rollout of %d nodes: %s, %.0f operator API requests, peak RSS %.1f MB\n  %s\n  %s\n%s",
		len(nodes), d.Round(time.Millisecond), after-before, peak, spent, passes, rowTimes(done, wave))
	// go test cuts a benchmark's log short: the file has it whole.
	t.Log(summary)
	appendResult(t, "p7-rows.txt", summary+"\n")
	p.rollouts = append(p.rollouts, d)
	p.perPod = append(p.perPod, (after-before)/float64(len(nodes)*p7Pods))
	p.peakMB = append(p.peakMB, peak)
}

func (p *p7) record(b *testing.B, nodes, wave int) {
	r, l := Seconds(p.rollouts), Seconds(p.loops)
	waves := (nodes + wave - 1) / wave
	perPod := Sample{Values: p.perPod, Unit: "req/pod"}
	record(
		Row{Scenario: "P7", Side: fmt.Sprintf("limit loop, %d waves of %d nodes × %d pods, each drained and uncordoned, back to back on one clock", waves, wave, p7Pods), Sample: l},
		Row{Scenario: "P7", Side: fmt.Sprintf("operator, rollout of %d nodes × %d pods at maxUnavailable %s (%d at once)", nodes, p7Pods, p7MaxUnavailable, wave),
			Sample: r, Ratio: r.Median() / l.Median(), Of: "P7 limit loop", Max: 1.3},
		Row{Scenario: "P7", Side: "operator API requests per evicted pod, whole rollout (every node drained and restored; rollout controller and webhook included)",
			Sample: perPod, Max: 2.2},
		Row{Scenario: "P7", Side: "operator peak RSS (VmHWM), fresh process, through the fleet's preparation and the rollout", Sample: Sample{Values: p.peakMB, Unit: "MB"}},
	)
	b.ReportMetric(r.Median(), "rollout-succeeded-s")
	b.ReportMetric(l.Median(), "limit-waves-s")
	b.ReportMetric(perPod.Median(), "req/pod")
}

// rolloutDrain creates a rollout of nodes and returns the time until a
// watch sees it Succeeded, and the rollout as seen then; then it deletes it
// and waits until it is gone (not timed).
func rolloutDrain(t testing.TB, c *testcluster.Cluster, w client.WithWatch, nodes []string, mu intstr.IntOrString) (time.Duration, *nmv1alpha1.NodeMaintenanceRollout) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	runCounter++
	r := &nmv1alpha1.NodeMaintenanceRollout{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-r%d-%d", os.Getpid(), runCounter)},
		Spec:       nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: nodes, Reason: "benchmark", MaxUnavailable: ptr.To(mu)},
	}
	watcher, err := w.Watch(ctx, &nmv1alpha1.NodeMaintenanceRolloutList{}, client.MatchingFields{"metadata.name": r.Name})
	if err != nil {
		t.Fatalf("watch NodeMaintenanceRollout %s: %v", r.Name, err)
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
	done := waitRolloutSucceeded(ctx, t, watcher, r.Name)
	lastDrain = span{start: start, end: time.Now()}
	return lastDrain.end.Sub(start), done
}

// waitRolloutSucceeded returns the rollout when the watch sees it
// Succeeded, and fails the test when it halts or the deadline passes.
func waitRolloutSucceeded(ctx context.Context, t testing.TB, watcher watch.Interface, name string) *nmv1alpha1.NodeMaintenanceRollout {
	t.Helper()
	for {
		select {
		case <-ctx.Done():
			t.Fatalf("rollout %s not Succeeded before the deadline", name)
		case ev, ok := <-watcher.ResultChan():
			if !ok {
				t.Fatalf("the watch of rollout %s ended", name)
			}
			got, ok := ev.Object.(*nmv1alpha1.NodeMaintenanceRollout)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			switch got.Status.Phase {
			case nmv1alpha1.RolloutSucceeded:
				return got
			case nmv1alpha1.RolloutHalted:
				t.Fatalf("rollout %s Halted: %s", name, got.Status.Message)
			}
		}
	}
}

// limitWaves runs the limit loop on nodes a wave at a time: a wave's nodes
// drained at once, then uncordoned at once, before the next wave starts.
// Every node's watches are opened before the clock, as the operator's
// caches are; then one clock runs from the first wave's cordons until the
// last wave's uncordons are answered, as a user running the waves back to
// back would see it. What the cluster still does for a wave (the evicted
// pods' replacements created, scheduled and started) goes on while the
// next wave runs, on the clock, as it does during a rollout. It returns
// that time and the CPU each cluster process used in it.
func limitWaves(t testing.TB, cs kubernetes.Interface, nodes []string, size int) (time.Duration, string) {
	t.Helper()
	drainers := openLimitDrainers(t, cs, nodes)
	before := cpuByProcess(t)
	start := time.Now()
	for from := 0; from < len(nodes); from += size {
		to := min(from+size, len(nodes))
		runLimitDrainers(t, drainers[from:to])
		uncordonAll(t, cs, nodes[from:to])
	}
	d := time.Since(start)
	return d, cpuSpent(before, cpuByProcess(t))
}

// uncordonAll uncordons nodes at once and returns when every patch has
// been answered: as the rollout counts a node restored once its
// maintenance uncordoned it, without waiting for the node lifecycle
// controller to take the unschedulable taint off.
func uncordonAll(t testing.TB, cs kubernetes.Interface, nodes []string) {
	t.Helper()
	patch := []byte(`{"spec":{"unschedulable":false}}`)
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		go func() {
			_, err := cs.CoreV1().Nodes().Patch(context.Background(), n, k8stypes.StrategicMergePatchType, patch, metav1.PatchOptions{})
			if err != nil {
				err = fmt.Errorf("uncordon node %s: %w", n, err)
			}
			errs <- err
		}()
	}
	for range nodes {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
