package bench

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain/live"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/webhook"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// P8 grows one cluster in steps and measures, at each, what P1 and P5
// measure: so that the growth of each figure with the cluster's size shows.
const (
	p8DefaultSteps = "10,100,1000,5000"
	p8PodsPerNode  = 10
	p8DrainPods    = 30
	// p8Existing NodeMaintenances exist while p8Timed more are created one
	// at a time, each create's return timed.
	p8Existing = 500
	p8Timed    = 150
	// p8Baseline of the p8Existing are created one at a time first, timed:
	// the same create with few NodeMaintenances present.
	p8Baseline = 30
	// p8ProfileSeconds of CPU profile are taken during the timed creates.
	p8ProfileSeconds = 5
	// p8IdleProfileSeconds of CPU profile of the idle operator are taken
	// at the target step: at 0.05 cores, 20 s hold about 100 samples.
	p8IdleProfileSeconds = 20
	// p8IdleWindow is how long each process's CPU is watched on the idle
	// cluster of a step.
	p8IdleWindow = 10 * time.Second
	// p8KwokParallelism is kwok's parallelism in a cluster that runs P8.
	p8KwokParallelism = 32
	// p8HeartbeatFactor is kwokctl's --heartbeat-factor in a cluster that
	// runs P8, instead of its default 5: node leases of 800 s renewed every
	// 200 s (25 renewals a second for 5000 nodes instead of 100), and
	// kube-controller-manager's --node-monitor-grace-period 13m20s.
	p8HeartbeatFactor = 20
	// p8ControllerManagerQPS is kube-controller-manager's --kube-api-qps in
	// a cluster that runs P8, instead of its default 20.
	p8ControllerManagerQPS = 500
)

// p8PodsWait is how long P8's P1 drains give their Deployment's pods to run
// on a cluster of nodes nodes: the harness's 2 minutes plus 50 ms a node,
// since every step of the way (the Deployment and ReplicaSet controllers,
// the scheduler, kwok) waits on an API server that serves more nodes.
func p8PodsWait(nodes int) time.Duration {
	return 2*time.Minute + time.Duration(nodes)*50*time.Millisecond
}

// p8Pods is the bare pods per populated node: p8PodsPerNode unless
// BENCH_P8_PODS says otherwise (a short trial of the steps' other figures).
var p8Pods = envInt("BENCH_P8_PODS", p8PodsPerNode)

// p8Processes are the processes whose CPU and memory P8 reports at each
// step: the cluster's, the operator, and this benchmark itself.
var p8Processes = append(slices.Clone(cpuProcesses), "bench.test")

// p8Step is what one step measured, for the growth table.
type p8Step struct {
	nodes, pods                  int
	populate                     time.Duration
	op, limit, rss, heap, perPod float64
	idleCPU, machineMB           float64
	processRSS, processCPU       map[string]float64
	admissionP50, admissionP99   float64
	admissionExisting, succeeded int
}

// BenchmarkP8: one cluster grown in steps (BENCH_P8_NODES, 10, 100, 1000 and
// 5000 nodes by default, p8PodsPerNode bare pods each). At each step: P1's
// drain (operator against the limit loop), the operator's memory after a
// fresh sync and its idle CPU, its API requests per evicted pod, and the
// CPU and memory of each process of the cluster. At the target step
// (BENCH_P8_TARGET, 5000 by default, else the largest) the targets apply
// and the admission latency of a create is measured while p8Existing
// NodeMaintenances exist. Long and memory-hungry: it runs only when asked
// by name (make bench BENCH=P8).
func BenchmarkP8(b *testing.B) {
	if !p8Asked() {
		b.Skip("P8 is long and memory-hungry: it runs only when asked by name, make bench BENCH=P8")
	}
	steps, err := parseSteps(envString("BENCH_P8_NODES", p8DefaultSteps))
	if err != nil {
		b.Fatal(err)
	}
	target := targetStep(steps, envInt("BENCH_P8_TARGET", 5000))
	c := testcluster.Get(b)
	w := watchClient(b, c)
	pop := newPopulation(b, c, bulkClient(b, c))
	var growth []p8Step
	for _, n := range steps {
		growth = append(growth, p8Grow(b, pop, n))
		s := &growth[len(growth)-1]
		// Written after each measurement: a run stopped by its timeout
		// keeps what it measured.
		measures := []func(){
			func() { p8Components(b, c, s) },
			func() { p8Operator(b, c, s, n == target) },
			func() { p8Drains(b, c, w, s, n == target) },
		}
		if n == target {
			// The previews come last: their unbounded lists of every pod
			// must not weigh on the API server while the creates are timed.
			measures = append(measures, func() { p8Admission(b, c, pop, s) }, func() { p8Previews(b, c, pop) })
		}
		for _, measure := range measures {
			measure()
			writeP8(b, growth, target)
		}
	}
}

// p8Asked reports whether the benchmarks asked for (-test.bench) name P8.
func p8Asked() bool {
	f := flag.Lookup("test.bench")
	return f != nil && strings.Contains(f.Value.String(), "P8")
}

// largeClusterAsked reports whether the benchmarks asked for include one of
// hundreds of nodes or more: P8, or P7 (its -test.bench pattern matches
// BenchmarkP7, as `make bench`'s default does).
func largeClusterAsked() bool {
	if p8Asked() {
		return true
	}
	f := flag.Lookup("test.bench")
	if f == nil || f.Value.String() == "" {
		return false // no benchmark runs
	}
	// -test.bench matches each level of a name apart; P7 has one level.
	re, err := regexp.Compile(strings.Split(f.Value.String(), "/")[0])
	return err == nil && re.MatchString("BenchmarkP7")
}

// parseSteps reads a comma-separated list of growing node counts.
func parseSteps(v string) ([]int, error) {
	var steps []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("BENCH_P8_NODES=%q: %q is not a positive node count", v, f)
		}
		if len(steps) > 0 && n <= steps[len(steps)-1] {
			return nil, fmt.Errorf("BENCH_P8_NODES=%q: the steps must grow (%d after %d): the cluster is never shrunk", v, n, steps[len(steps)-1])
		}
		steps = append(steps, n)
	}
	return steps, nil
}

// targetStep is want when it is one of the steps, else the largest step.
func targetStep(steps []int, want int) int {
	if slices.Contains(steps, want) {
		return want
	}
	return steps[len(steps)-1]
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func p8Scenario(nodes int) string { return fmt.Sprintf("P8 %d nodes", nodes) }

// p8Grow grows the population to nodes nodes and records how long that took.
func p8Grow(b *testing.B, pop *population, nodes int) p8Step {
	added := nodes - len(pop.nodes)
	start := time.Now()
	pop.grow(b, added, p8Pods)
	s := p8Step{nodes: nodes, pods: pop.pods, populate: time.Since(start)}
	record(Row{Scenario: p8Scenario(nodes),
		Side:   fmt.Sprintf("populate: %d nodes and %d bare pods added (until Ready and Running)", added, added*p8Pods),
		Sample: Seconds([]time.Duration{s.populate})})
	b.Logf("P8: %d nodes, %d pods; this step's populate took %s", nodes, pop.pods, s.populate.Round(time.Second))
	return s
}

// p8Components records each process's CPU over p8IdleWindow of the idle
// cluster (heartbeats, leases, controllers: what its size alone costs) and
// its resident memory, and the machine's memory in use.
func p8Components(b *testing.B, c *testcluster.Cluster, s *p8Step) {
	procs := processesByName(b, p8Processes, c.Name)
	procs["bench.test"] = []int{os.Getpid()}
	for _, name := range p8Processes {
		if len(procs[name]) == 0 {
			b.Logf("P8: no process %s of cluster %s found", name, c.Name)
		}
	}
	before := sumByProcess(procs, processCPUSeconds)
	start := time.Now()
	time.Sleep(p8IdleWindow)
	after := sumByProcess(procs, processCPUSeconds)
	elapsed := time.Since(start).Seconds()
	s.processCPU = map[string]float64{}
	s.processRSS = sumByProcess(procs, func(pid int) (float64, error) { return processStatusMB(pid, "VmRSS") })
	scenario := p8Scenario(s.nodes)
	for _, name := range p8Processes {
		s.processCPU[name] = (after[name] - before[name]) / elapsed
		record(
			Row{Scenario: scenario, Side: "CPU of " + name + ", cluster idle", Sample: Sample{Values: []float64{s.processCPU[name]}, Unit: "cores"}},
			Row{Scenario: scenario, Side: "RSS of " + name, Sample: Sample{Values: []float64{s.processRSS[name]}, Unit: "MB"}},
		)
	}
	used, err := machineMemoryInUseMB()
	if err != nil {
		b.Fatal(err)
	}
	s.machineMB = used
	record(Row{Scenario: scenario, Side: "machine memory in use (MemTotal − MemAvailable, every process of the machine)",
		Sample: Sample{Values: []float64{used}, Unit: "MB"}})
}

// machineMemoryInUseMB is MemTotal − MemAvailable of /proc/meminfo, in MB.
func machineMemoryInUseMB() (float64, error) {
	mb, err := procKBFieldsMB("/proc/meminfo", "MemTotal", "MemAvailable")
	if err != nil {
		return 0, err
	}
	return mb[0] - mb[1], nil
}

// p8Operator restarts the operator once per run, as P5 does, so that its
// memory is what syncing this cluster costs: its RSS and Go heap in use
// after the sync, and its CPU while idle.
func p8Operator(b *testing.B, c *testcluster.Cluster, s *p8Step, target bool) {
	rss, heap, cpu := Sample{Unit: "MB"}, Sample{Unit: "MB"}, Sample{Unit: "cores"}
	for range runs {
		if err := op.restart(c); err != nil {
			b.Fatalf("restart the operator on %d nodes: %v", s.nodes, err)
		}
		cores, mb, err := op.idle(5*time.Second, 5*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		cpu.Values = append(cpu.Values, cores)
		inUse, err := op.metric("go_memstats_heap_inuse_bytes")
		if err != nil {
			b.Fatal(err)
		}
		rss.Values, heap.Values = append(rss.Values, mb), append(heap.Values, inUse/(1<<20))
	}
	if dir := resultsDir(); dir != "" && target {
		if err := op.saveProfile("heap", filepath.Join(dir, "p8-operator-heap.pprof")); err != nil {
			b.Logf("heap profile not saved: %v", err)
		}
		// What the idle operator spends its CPU on, after the samples
		// above (a profile costs CPU of its own).
		path := filepath.Join(dir, "p8-idle-operator-cpu.pprof")
		if err := op.saveProfile(fmt.Sprintf("profile?seconds=%d", p8IdleProfileSeconds), path); err != nil {
			b.Logf("idle CPU profile not saved: %v", err)
		}
	}
	s.rss, s.heap, s.idleCPU = rss.Median(), heap.Median(), cpu.Median()
	maxRSS, maxCPU := 0.0, 0.0
	if target {
		maxRSS, maxCPU = 150, 0.05
	}
	scenario := p8Scenario(s.nodes)
	record(
		Row{Scenario: scenario, Side: fmt.Sprintf("operator RSS after sync (%d nodes, %d pods)", s.nodes, s.pods), Sample: rss, Max: maxRSS},
		Row{Scenario: scenario, Side: "operator Go heap in use after sync", Sample: heap},
		Row{Scenario: scenario, Side: "operator CPU while idle", Sample: cpu, Max: maxCPU},
	)
}

// p8Drains is P1 on this step's cluster: the operator against the limit
// loop, each on its own fresh node with p8DrainPods Deployment pods, sides
// alternating first; and the operator's API requests per evicted pod.
func p8Drains(b *testing.B, c *testcluster.Cluster, w client.WithWatch, s *p8Step, target bool) {
	var opT, limitT []time.Duration
	perPod := Sample{Unit: "req/pod"}
	for i := range runs {
		eachRun(b, fmt.Sprintf("P8-%dnodes/run%d", s.nodes, i), func(t testing.TB) {
			start := time.Now()
			nodes := prepareNodesWithin(t, c, c.Namespace(t), 2, p8DrainPods, 0, p8PodsWait(s.nodes))
			t.Logf("P8: %d nodes: two nodes with %d Deployment pods each ready in %s", s.nodes, p8DrainPods, time.Since(start).Round(time.Millisecond))
			sides := []func(){
				func() {
					before, err := op.requests()
					if err != nil {
						t.Fatal(err)
					}
					opT = append(opT, operatorDrain(t, c, w, nodes[:1]))
					after, err := op.requests()
					if err != nil {
						t.Fatal(err)
					}
					perPod.Values = append(perPod.Values, (after-before)/p8DrainPods)
				},
				func() { limitT = append(limitT, limitDrainAll(t, c, nodes[1:])) },
			}
			for k := range sides {
				sides[(i+k)%len(sides)]()
			}
		})
	}
	opS, limit := Seconds(opT), Seconds(limitT)
	s.op, s.limit, s.perPod = opS.Median(), limit.Median(), perPod.Median()
	maxRatio := 0.0
	if target {
		maxRatio = 1.3
	}
	scenario := p8Scenario(s.nodes)
	record(
		Row{Scenario: scenario, Side: fmt.Sprintf("limit loop, P1 (%d pods)", p8DrainPods), Sample: limit},
		Row{Scenario: scenario, Side: fmt.Sprintf("operator, P1 (%d pods)", p8DrainPods), Sample: opS, Ratio: s.op / s.limit, Of: limitSide, Max: maxRatio},
		Row{Scenario: scenario, Side: "operator API requests per evicted pod (P1 drains)", Sample: perPod},
	)
}

// p8AdmissionLabel marks the NodeMaintenances of the admission measurement.
var p8AdmissionLabel = map[string]string{"bench.nodemaintenance.medik8s.io/run": fmt.Sprintf("p8-admission-%d", os.Getpid())}

func p8Maintenance(node string) *nmv1beta1.NodeMaintenance {
	nm := &nmv1beta1.NodeMaintenance{Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node, Reason: "benchmark"}}
	nm.Name, nm.Labels = "bench-"+node, maps.Clone(p8AdmissionLabel)
	return nm
}

// p8Admission creates p8Existing NodeMaintenances of populated nodes (they
// drain its bare pods), the first p8Baseline of them one at a time, each
// create's return timed (the baseline: few exist); waits until they are
// Succeeded (or five minutes); then creates p8Timed more, one at a time,
// each of another populated node, and records the median and p99 of how
// long each create took to return: the admission webhook and the store,
// as a user's create sees them. Beside each timed create it creates a
// ConfigMap, also timed: an object no webhook admits, stored by the same
// API server in the same moment, the floor under any create there. And it
// reads the operator's own time in the webhook (controller-runtime's
// webhook latency, its mean over the timed creates). It deletes them all
// afterwards.
func p8Admission(b *testing.B, c *testcluster.Cluster, pop *population, s *p8Step) {
	// A small trial run (BENCH_P8_NODES=10,100) measures the same on fewer.
	existing := min(p8Existing, len(pop.nodes)/2)
	timed := min(p8Timed, len(pop.nodes)-existing)
	defer p8DeleteMaintenances(b, c)
	ns := c.Namespace(b)
	baseline, _ := p8TimedCreates(b, c, ns, pop.nodes[:min(p8Baseline, existing)])
	parallel(b, 16, existing-len(baseline.Values), func(i int) error {
		node := pop.nodes[len(baseline.Values)+i]
		if err := c.Client.Create(context.Background(), p8Maintenance(node)); err != nil {
			return fmt.Errorf("create NodeMaintenance of node %s (%d exist): %w", node, existing, err)
		}
		return nil
	})
	s.admissionExisting, s.succeeded = existing, p8WaitSucceeded(b, c, existing, 5*time.Minute)
	profiled := make(chan struct{})
	if dir := resultsDir(); dir != "" {
		// Where the time of a create goes with that many NodeMaintenances.
		go func() { defer close(profiled); saveCPUProfiles(b, c, dir, "p8-admission", p8ProfileSeconds) }()
	} else {
		close(profiled)
	}
	inWebhook := webhookSeconds(b)
	lat, floor := p8TimedCreates(b, c, ns, pop.nodes[existing:existing+timed])
	inWebhook = webhookSeconds(b).since(inWebhook)
	<-profiled
	s.admissionP50, s.admissionP99 = lat.Percentile(50), lat.Percentile(99)
	side := fmt.Sprintf("create's return, one at a time, while %d NodeMaintenances exist (%d of them Succeeded)", existing, s.succeeded)
	scenario := p8Scenario(s.nodes)
	record(
		Row{Scenario: scenario, Side: fmt.Sprintf("create's return, one at a time, while 0–%d NodeMaintenances exist: median of %d creates (baseline)",
			len(baseline.Values)-1, len(baseline.Values)), Sample: baseline},
		Row{Scenario: scenario, Side: fmt.Sprintf("%s: median of %d creates", side, timed), Sample: lat,
			Ratio: lat.Median() / baseline.Median(), Of: "baseline"},
		Row{Scenario: scenario, Side: fmt.Sprintf("%s: p99 of %d creates", side, timed),
			Sample: Sample{Values: []float64{s.admissionP99}, Unit: "ms"}, Max: 50},
		Row{Scenario: scenario, Side: fmt.Sprintf("a ConfigMap's create beside each of those (no webhook): median of %d", timed), Sample: floor},
		Row{Scenario: scenario, Side: fmt.Sprintf("a ConfigMap's create beside each of those (no webhook): p99 of %d", timed),
			Sample: Sample{Values: []float64{floor.Percentile(99)}, Unit: "ms"}},
		Row{Scenario: scenario, Side: fmt.Sprintf("the operator's webhook, from request to response (its metrics): mean of %.0f calls", inWebhook.calls),
			Sample: Sample{Values: []float64{inWebhook.mean()}, Unit: "ms"}},
	)
}

// p8Previews times the drain preview of a populated node (10 bare pods),
// runs times each way, one after the other: unbounded, as the
// nodemaintenance_drain_preview data source and a nodemaintenance's plan
// read it (every node and running pod of the cluster, for the room
// estimate), and within live.HotPath, as the webhook and a rollout's plan
// (up to 20 nodes) read it. The provider's reads are consistent; so are the
// unbounded ones here, while HotPath reads the watch cache as the webhook
// does.
func p8Previews(b *testing.B, c *testcluster.Cluster, pop *population) {
	node := pop.nodes[len(pop.nodes)-1] // not one of the admission's
	all, hot := Sample{Unit: "s"}, Sample{Unit: "s"}
	for range runs {
		for _, side := range []struct {
			sample *Sample
			bounds live.Bounds
		}{{&all, live.Bounds{}}, {&hot, live.HotPath}} {
			start := time.Now()
			if _, err := live.PreviewWithin(context.Background(), c.Client, node, nil, time.Now(), side.bounds); err != nil {
				b.Fatalf("preview the drain of node %s within %+v: %v", node, side.bounds, err)
			}
			side.sample.Values = append(side.sample.Values, time.Since(start).Seconds())
		}
	}
	scenario := p8Scenario(len(pop.nodes))
	record(
		Row{Scenario: scenario, Side: "drain preview of one node, unbounded (the data source; a nodemaintenance's plan)", Sample: all},
		Row{Scenario: scenario, Side: "drain preview of one node, within live.HotPath (the webhook; a rollout's plan, per node)", Sample: hot,
			Ratio: hot.Median() / all.Median(), Of: "unbounded"},
	)
}

// p8TimedCreates creates a NodeMaintenance of each node, one at a time, and
// after each a ConfigMap in namespace ns, and returns how long each create
// took to return: the NodeMaintenances', and the ConfigMaps'.
func p8TimedCreates(b *testing.B, c *testcluster.Cluster, ns string, nodes []string) (maintenances, configMaps Sample) {
	maintenances, configMaps = Sample{Unit: "ms"}, Sample{Unit: "ms"}
	timed := func(obj client.Object) float64 {
		start := time.Now()
		if err := c.Client.Create(context.Background(), obj); err != nil {
			b.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
		}
		return float64(time.Since(start).Microseconds()) / 1000
	}
	for _, node := range nodes {
		maintenances.Values = append(maintenances.Values, timed(p8Maintenance(node)))
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "floor-" + node}, Data: map[string]string{"node": node}}
		configMaps.Values = append(configMaps.Values, timed(cm))
	}
	return maintenances, configMaps
}

// webhookTime is the operator's NodeMaintenance webhook's calls so far and
// the seconds they took (controller-runtime's webhook latency histogram).
type webhookTime struct{ calls, seconds float64 }

func webhookSeconds(t testing.TB) webhookTime {
	calls, seconds, err := op.histogram("controller_runtime_webhook_latency_seconds", fmt.Sprintf(`webhook="%s"`, webhook.Path))
	if err != nil {
		t.Fatalf("the operator's webhook latency: %v", err)
	}
	return webhookTime{calls: calls, seconds: seconds}
}

func (w webhookTime) since(before webhookTime) webhookTime {
	return webhookTime{calls: w.calls - before.calls, seconds: w.seconds - before.seconds}
}

// mean is the mean call in ms.
func (w webhookTime) mean() float64 {
	if w.calls == 0 {
		return 0
	}
	return w.seconds / w.calls * 1000
}

// p8WaitSucceeded waits up to timeout until want of the admission
// measurement's NodeMaintenances are Succeeded, and returns how many are.
func p8WaitSucceeded(b *testing.B, c *testcluster.Cluster, want int, timeout time.Duration) int {
	succeeded := 0
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		list := &nmv1beta1.NodeMaintenanceList{}
		if err := c.Client.List(context.Background(), list, client.MatchingLabels(p8AdmissionLabel)); err != nil {
			b.Fatalf("list the admission measurement's NodeMaintenances: %v", err)
		}
		succeeded = 0
		for _, nm := range list.Items {
			if nm.Status.Phase == nmv1beta1.MaintenanceSucceeded {
				succeeded++
			}
		}
		if succeeded >= want {
			break
		}
		time.Sleep(2 * time.Second)
	}
	b.Logf("P8: %d of %d NodeMaintenances Succeeded before the timed creates", succeeded, want)
	return succeeded
}

// p8DeleteMaintenances deletes the admission measurement's NodeMaintenances
// and waits until they are gone.
func p8DeleteMaintenances(b *testing.B, c *testcluster.Cluster) {
	err := c.Client.DeleteAllOf(context.Background(), &nmv1beta1.NodeMaintenance{}, client.MatchingLabels(p8AdmissionLabel))
	if err != nil {
		b.Errorf("delete the admission measurement's NodeMaintenances: %v", err)
	}
	pollFor(b, 10*time.Minute, 2*time.Second, "the admission measurement's NodeMaintenances to go", func(ctx context.Context) (bool, error) {
		list := &nmv1beta1.NodeMaintenanceList{}
		if err := c.Client.List(ctx, list, client.MatchingLabels(p8AdmissionLabel)); err != nil {
			return false, err
		}
		return len(list.Items) == 0, nil
	})
}

// writeP8 writes the growth table so far to .local/bench/p8-growth.md, and
// the rows so far to p8-results.md: a run stopped at a later step keeps
// what the earlier steps measured.
func writeP8(b *testing.B, growth []p8Step, target int) {
	table := p8GrowthTable(growth, target)
	b.Logf("P8 growth so far:\n%s", table)
	dir := resultsDir()
	if dir == "" {
		return
	}
	mu.Lock()
	partial := Results(rows)
	mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Logf("P8 results not written: %v", err)
		return
	}
	header := fmt.Sprintf("Measured %s, %d runs per figure.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), runs)
	for name, text := range map[string]string{"p8-growth.md": table, "p8-results.md": partial} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(header+text), 0o644); err != nil {
			b.Logf("P8 results not written: %v", err)
		}
	}
}

// p8GrowthTable renders the figures of each step as one markdown row.
func p8GrowthTable(growth []p8Step, target int) string {
	var sb strings.Builder
	sb.WriteString("| nodes | pods | populate | P1 operator | P1 limit loop | ratio | operator RSS | Go heap | req/pod | operator idle CPU |" +
		" kube-apiserver RSS / CPU | etcd RSS / CPU | kwok RSS / CPU | machine memory in use |\n")
	sb.WriteString("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range growth {
		nodes := strconv.Itoa(s.nodes)
		if s.nodes == target {
			nodes += " (target)"
		}
		proc := func(name string) string {
			return fmt.Sprintf("%.0f MB / %.2f cores", s.processRSS[name], s.processCPU[name])
		}
		fmt.Fprintf(&sb, "| %s | %d | %.0f s | %.3f s | %.3f s | %.2f× | %.1f MB | %.1f MB | %.2f | %.4f cores | %s | %s | %s | %.1f GB |\n",
			nodes, s.pods, s.populate.Seconds(), s.op, s.limit, s.op/s.limit, s.rss, s.heap, s.perPod, s.idleCPU,
			proc("kube-apiserver"), proc("etcd"), proc("kwok"), s.machineMB/1024)
	}
	for _, s := range growth {
		if s.admissionExisting > 0 {
			fmt.Fprintf(&sb, "\nAt %d nodes, a NodeMaintenance create's return while %d exist (%d Succeeded): p50 %.1f ms, p99 %.1f ms.\n",
				s.nodes, s.admissionExisting, s.succeeded, s.admissionP50, s.admissionP99)
		}
	}
	return sb.String()
}
