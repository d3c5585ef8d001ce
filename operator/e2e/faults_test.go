package e2e

// Faults: whatever fails during a maintenance, the node ends in a known state
// and the NodeMaintenance says what happened. Each test breaks one real part
// of the system (the operator process, the API server, the webhook's network
// path, the node, the lease, a PDB) in the middle of a drain.

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testoperator"
)

// slowDrain puts n pods of a Deployment on a fresh node under a PDB with
// maxUnavailable 1, each taking delay to terminate, so that a drain takes
// about n × delay, and adds a spare node for the replacements. The node
// carries a foreign taint and label, so that "restored exactly" means more
// than "uncordoned".
func slowDrain(t *testing.T, c *testcluster.Cluster, app string, n int32, delay time.Duration) (ns, node string) {
	t.Helper()
	ns = c.Namespace(t)
	node = deploymentNode(t, c, ns, app, n, nil, ptr.To(intstr.FromInt32(1)), testcluster.WithTerminationDelay(delay))
	nd := getNode(t, c, node)
	orig := nd.DeepCopy()
	nd.Spec.Taints = append(nd.Spec.Taints, corev1.Taint{Key: "example.com/foreign", Value: "x", Effect: corev1.TaintEffectPreferNoSchedule})
	nd.Labels["example.com/team"] = "storage"
	if err := c.Client.Patch(bg(), nd, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	return ns, node
}

// nodeState is what a maintenance changes on a node and must give back.
type nodeState struct {
	Unschedulable bool
	Taints        []corev1.Taint
	Labels        map[string]string
	Annotations   map[string]string
	// Conditions are every condition, by type, as conditionsOf has them.
	Conditions []corev1.NodeCondition
}

func stateOf(t *testing.T, c *testcluster.Cluster, node string) nodeState {
	t.Helper()
	n := getNode(t, c, node)
	return nodeState{n.Spec.Unschedulable, n.Spec.Taints, n.Labels, n.Annotations, conditionsOf(n)}
}

// conditionsOf are the node's conditions sorted by type, the heartbeats of
// the kubelet's (kwok's) left out: they move on their own. The lifecycle
// conditions of KEP-5683 are kept whole, times included.
func conditionsOf(n *corev1.Node) []corev1.NodeCondition {
	var out []corev1.NodeCondition
	for _, cond := range n.Status.Conditions {
		if !lifecycleType(cond.Type) {
			cond.LastHeartbeatTime = metav1.Time{}
		}
		out = append(out, cond)
	}
	slices.SortFunc(out, func(a, b corev1.NodeCondition) int { return strings.Compare(string(a.Type), string(b.Type)) })
	return out
}

// settledStateOf waits until kwok has made a new node Ready (no not-ready
// taint, its kubelet labels set), then takes its state: the baseline a
// restore is compared with.
func settledStateOf(t *testing.T, c *testcluster.Cluster, node string) nodeState {
	t.Helper()
	testcluster.WaitFor(t, time.Minute, "node "+node+" to settle", func(context.Context) (bool, error) {
		n := getNode(t, c, node)
		_, labelled := n.Labels[corev1.LabelArchStable]
		_, beta := n.Labels["beta.kubernetes.io/arch"]
		return labelled && beta && !slices.ContainsFunc(n.Spec.Taints, func(tt corev1.Taint) bool {
			return strings.HasPrefix(tt.Key, "node.kubernetes.io/")
		}), nil
	})
	return stateOf(t, c, node)
}

func assertSameNodeState(t *testing.T, node string, before, after nodeState) {
	t.Helper()
	if !equality.Semantic.DeepEqual(before, after) {
		t.Errorf("node %s is not restored exactly:\nbefore %+v\nafter  %+v", node, before, after)
	}
}

// assertEvictedOnce reads the API server's audit log: every pod of ns was
// evicted (an eviction the API server accepted) exactly once, and want pods
// were.
func assertEvictedOnce(t *testing.T, c *testcluster.Cluster, ns string, want int) {
	t.Helper()
	audit, err := c.EvictionLog(bg(), ns)
	if err != nil {
		t.Fatal(err)
	}
	accepted, timedOut, refused := audit.Accepted, audit.TimedOut, audit.Refused
	for pod, at := range accepted {
		if len(at) > 1 {
			t.Errorf("pod %s/%s was evicted %d times", ns, pod, len(at))
		}
	}
	// A kill can fall while an eviction is on its way: kube-apiserver then
	// answers 504 at once and its handler may still evict the pod. Such a
	// pod, gone with no accepted eviction, was evicted by that request.
	evicted := len(accepted)
	for pod, at := range timedOut {
		if _, ok := accepted[pod]; !ok {
			evicted++
			t.Logf("pod %s/%s: no eviction accepted, %d answered 504 (client killed): counted as evicted by one of them", ns, pod, len(at))
		}
	}
	if evicted != want {
		t.Errorf("%d pods of %s were evicted, want %d: accepted %v, answered 504 %v", evicted, ns, want, accepted, timedOut)
	}
	t.Logf("audit log: %d evictions accepted, %d refused (PDB)", len(accepted), refused)
}

var (
	processOnce sync.Once
	process     *testoperator.Process
	processErr  error
)

// processFlags make the binary the package operator's stand-in: the leases of
// testoperator.DefaultOptions and the same webhook configuration, which it
// points at itself.
var processFlags = []string{"--lease-duration=6s", "--lease-retry-interval=500ms", "--webhook-config-name=node-maintenance-operator-local"}

// runOperatorProcess replaces the package's in-process operator with the
// operator binary, a process of its own that a test can kill, and puts the
// in-process one back when the test ends.
func runOperatorProcess(t *testing.T, c *testcluster.Cluster, extra ...string) *testoperator.Process {
	t.Helper()
	processOnce.Do(func() { process, processErr = testoperator.BuildProcess() })
	if processErr != nil {
		t.Fatal(processErr)
	}
	operator.Stop()
	t.Cleanup(func() {
		process.Stop()
		if t.Failed() {
			logTail(t, process.LogPath, 60)
		}
		var err error
		if operator, err = testoperator.Start(c, defaultOptions()); err != nil {
			t.Errorf("restart the in-process operator: %v", err)
		}
	})
	if zapLevel() == zapcore.DebugLevel {
		extra = append(extra, "--zap-log-level=debug")
	}
	if err := process.Start(c, slices.Concat(processFlags, extra)...); err != nil {
		t.Fatalf("start the operator binary: %v", err)
	}
	return process
}

// logTail logs the last n lines of the file at path: the operator binary's
// log, which lives in a scratch directory, when a test fails.
func logTail(t *testing.T, path string, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("operator log: %v", err)
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	t.Logf("last %d lines of the operator log %s:\n%s", min(n, len(lines)), path, strings.Join(lines[max(0, len(lines)-n):], "\n"))
}

// The operator binary is SIGKILLed five times at random points of one drain
// and started again each time: the maintenance still ends Succeeded with the
// right counts, no pod is evicted twice, and delete gives the node back
// exactly as it was.
func TestOperatorKilledFiveTimesMidDrain(t *testing.T) {
	c := testcluster.Get(t)
	// A PDB lets one pod go at a time, 2 s each: about 24 s of drain, well
	// beyond five kill points (up to 2 s apart) and restarts (1-2 s each
	// on a busy machine).
	const pods = 12
	ns, node := slowDrain(t, c, "svc", pods, 2*time.Second)
	before := settledStateOf(t, c, node)
	p := runOperatorProcess(t, c)

	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("kill points from seed %d", seed)
	name := testcluster.UniqueName(t, "killed")
	createMaintenance(t, c, name, node, "")
	for i := 1; i <= 5; i++ {
		time.Sleep(time.Duration(rng.Int64N(int64(2 * time.Second))))
		nm := getMaintenance(t, c, name)
		if nm.Status.Phase == nmv1beta1.MaintenanceSucceeded || nm.Status.Phase == nmv1beta1.MaintenanceFailed {
			t.Fatalf("the drain ended (%s) before kill %d: the scenario must be slower", nm.Status.Phase, i)
		}
		p.Kill()
		t.Logf("kill %d: phase=%q evicted %d of %d, pending %v", i, nm.Status.Phase, nm.Status.EvictionPods-len(nm.Status.PendingPods), nm.Status.EvictionPods, nm.Status.PendingPods)
		if err := p.Start(c, processFlags...); err != nil {
			t.Fatalf("restart %d of the operator: %v", i, err)
		}
	}
	finishSlowDrain(t, c, name, ns, node, pods, before, "five kills")
}

// finishSlowDrain ends a slowDrain maintenance that went through a fault:
// it succeeds (through any cut-off eviction) with every pod counted and
// evicted exactly once, and delete gives the node back as it was before.
func finishSlowDrain(t *testing.T, c *testcluster.Cluster, name, ns, node string, pods int, before nodeState, fault string) {
	t.Helper()
	nm := waitDrainThroughCutOffs(t, c, name, ns)
	if nm.Status.TotalPods != pods || nm.Status.EvictionPods != pods || nm.Status.DrainProgress != 100 || len(nm.Status.PendingPods) != 0 {
		t.Errorf("counts after %s: %+v, want %d pods, all evicted", fault, nm.Status, pods)
	}
	assertEvictedOnce(t, c, ns, pods)
	deleteMaintenance(t, c, name)
	assertSameNodeState(t, node, before, stateOf(t, c, node))
}

// waitDrainThroughCutOffs waits for the maintenance to succeed after a fault
// that may have cut an eviction off mid-call (a killed operator, a killed API
// server): then the budget of ns stays charged for a pod that keeps running
// until the disruption controller drops the entry (drain.DisruptedPodTimeout),
// and the drain waits that long. When the test sees such an entry, the
// NodeMaintenance must have said so in lastError while it waited.
func waitDrainThroughCutOffs(t *testing.T, c *testcluster.Cluster, name, ns string) *nmv1beta1.NodeMaintenance {
	t.Helper()
	var cutOff []drain.InterruptedEviction
	explained := false
	nm := waitMaintenanceWithin(t, c, phaseTimeout+drain.DisruptedPodTimeout, name, "phase Succeeded", func(nm *nmv1beta1.NodeMaintenance) bool {
		if strings.Contains(nm.Status.LastError, "not terminating: an eviction of it was cut off") {
			explained = true
		}
		if cutOff == nil {
			cutOff = interruptedEvictions(t, c, ns)
		}
		return nm.Status.Phase == nmv1beta1.MaintenanceSucceeded
	})
	if cutOff != nil {
		t.Logf("an eviction was cut off: %s; explained in lastError: %v", cutOff[0], explained)
		if !explained {
			t.Errorf("lastError never explained the cut-off eviction (%s)", cutOff[0])
		}
	}
	return nm
}

// interruptedEvictions reads the budgets of ns and their pods from the API
// server and returns those charged for a pod that is not terminating.
func interruptedEvictions(t *testing.T, c *testcluster.Cluster, ns string) []drain.InterruptedEviction {
	t.Helper()
	pdbs := &policyv1.PodDisruptionBudgetList{}
	if err := c.Client.List(bg(), pdbs, client.InNamespace(ns)); err != nil {
		return nil
	}
	running := func(key types.NamespacedName) bool {
		pod := &corev1.Pod{}
		return c.Client.Get(bg(), key, pod) == nil && pod.DeletionTimestamp == nil
	}
	return drain.InterruptedEvictions(pdbs.Items, running, time.Now())
}

// The API server restarted in the middle of a drain: the operator, the same
// process throughout, reconnects and finishes the drain with the right
// counts, no pod is evicted twice, and delete gives the node back exactly.
// Once without leader election, and once with it, as installed: the outage
// (about 3 s) is shorter than the leader lease's renew deadline (10 s), so
// the leader keeps its lease. A longer outage makes a leader exit and its
// Deployment start it again: the case of TestOperatorKilledFiveTimesMidDrain.
func TestAPIServerRestartedMidDrain(t *testing.T) {
	c := testcluster.Get(t)
	for _, tt := range []struct {
		name  string
		flags func(t *testing.T) []string
	}{
		{"without leader election", func(*testing.T) []string { return nil }},
		{"leader elected", func(t *testing.T) []string { return []string{"--leader-elect", "--namespace=" + c.Namespace(t)} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const pods = 12
			ns, node := slowDrain(t, c, "svc", pods, 2*time.Second)
			before := settledStateOf(t, c, node)
			p := runOperatorProcess(t, c, tt.flags(t)...)
			pid := p.Pid()

			// The replacements cannot start until the spare node is
			// uncordoned, after the restart: the PDB then holds the drain
			// after its first eviction, and the rest of it can only happen
			// through the watches and calls of a reconnected operator. (kwok
			// makes a replacement Ready at once, so an open spare node lets
			// the PDB allow the next eviction as soon as one is created,
			// and the whole drain could fit in the restart's grace period.)
			spare := spareNode(t, c, node)
			setUnschedulable(t, c, spare, true)

			name := testcluster.UniqueName(t, "restart")
			createMaintenance(t, c, name, node, "")
			waitMaintenance(t, c, name, "drain under way", func(nm *nmv1beta1.NodeMaintenance) bool {
				return nm.Status.Phase == nmv1beta1.MaintenanceRunning && nm.Status.EvictionPods == pods && len(nm.Status.PendingPods) < pods
			})
			// A second of grace: a terminating API server still serves the
			// open connections.
			restart, err := c.RestartAPIServer(bg(), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			nm := getMaintenance(t, c, name)
			t.Logf("kube-apiserver restarted: unreachable for %s (also restarted: %v); then phase=%q, %d of %d pods pending", restart.Outage.Round(time.Millisecond), restart.Restarted, nm.Status.Phase, len(nm.Status.PendingPods), nm.Status.EvictionPods)
			if nm.Status.Phase != nmv1beta1.MaintenanceRunning {
				t.Fatalf("the drain was over (%s) when the API server came back, with its replacements unschedulable", nm.Status.Phase)
			}
			setUnschedulable(t, c, spare, false)

			finishSlowDrain(t, c, name, ns, node, pods, before, "the restart")
			if !p.Running() || p.Pid() != pid {
				t.Errorf("the operator (pid %d) did not ride out the restart; its log: %s", pid, p.LogPath)
			}
		})
	}
}

// spareNode is the other node of node's pool: where deploymentNode's
// replacements go.
func spareNode(t *testing.T, c *testcluster.Cluster, node string) string {
	t.Helper()
	nodes := &corev1.NodeList{}
	if err := c.Client.List(bg(), nodes, client.MatchingLabels{testcluster.PoolLabel: getNode(t, c, node).Labels[testcluster.PoolLabel]}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if n.Name != node {
			return n.Name
		}
	}
	t.Fatalf("node %s has no spare node in its pool", node)
	return ""
}

func setUnschedulable(t *testing.T, c *testcluster.Cluster, node string, unschedulable bool) {
	t.Helper()
	n := getNode(t, c, node)
	orig := n.DeepCopy()
	n.Spec.Unschedulable = unschedulable
	if err := c.Client.Patch(bg(), n, client.MergeFrom(orig)); err != nil {
		t.Fatalf("set node %s unschedulable=%v: %v", node, unschedulable, err)
	}
}

// tcpRelay forwards loopback connections to a port it reads at each
// connection; closing it cuts the path, as a broken network would.
type tcpRelay struct {
	ln     net.Listener
	target func() int
	mu     sync.Mutex
	conns  []net.Conn
}

func newTCPRelay(t *testing.T, target func() int) *tcpRelay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &tcpRelay{ln: ln, target: target}
	go r.serve()
	t.Cleanup(r.cut)
	return r
}

func (r *tcpRelay) port() int { return r.ln.Addr().(*net.TCPAddr).Port }

// cut closes the listener and every open connection (the API server keeps
// its connections to a webhook alive).
func (r *tcpRelay) cut() {
	_ = r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		_ = c.Close()
	}
	r.conns = nil
}

func (r *tcpRelay) track(c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conns = append(r.conns, c)
}

func (r *tcpRelay) serve() {
	for {
		in, err := r.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", r.target()))
			if err != nil {
				return
			}
			defer out.Close()
			r.track(in)
			r.track(out)
			go func() { _, _ = io.Copy(out, in) }()
			_, _ = io.Copy(in, out)
		}()
	}
}

// The API server cannot reach the webhook: a create fails with an error that
// says the webhook could not be called and nothing is created; deleting a
// NodeMaintenance that exists still restores its node, because the updates
// that let it go never go to the webhook.
func TestWebhookUnreachable(t *testing.T) {
	c := testcluster.Get(t)
	// The relay reads the port of the package's process, which Start sets
	// before the process serves.
	relay := newTCPRelay(t, func() int { return process.WebhookPort })
	runOperatorProcess(t, c, fmt.Sprintf("--local-webhook-url=https://127.0.0.1:%d", relay.port()))

	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	other := pool.AddNode(t, "").Name
	before := settledStateOf(t, c, node)
	name := testcluster.UniqueName(t, "cut")
	createMaintenance(t, c, name, node, "")
	waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)

	relay.cut()
	otherBefore := settledStateOf(t, c, other)
	refused := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: testcluster.UniqueName(t, "refused")}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: other}}
	err := c.Client.Create(bg(), refused)
	if err == nil {
		deleteMaintenance(t, c, refused.Name)
		t.Fatal("a NodeMaintenance was admitted while the webhook was unreachable")
	}
	for _, want := range []string{"failed calling webhook", "vnodemaintenance.medik8s.io", fmt.Sprintf("127.0.0.1:%d", relay.port())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	assertSameNodeState(t, other, otherBefore, stateOf(t, c, other))
	list := &nmv1beta1.NodeMaintenanceList{}
	if err := c.Client.List(bg(), list); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(list.Items, func(nm nmv1beta1.NodeMaintenance) bool { return nm.Spec.NodeName == other }) {
		t.Errorf("a NodeMaintenance for %s exists after the refused create", other)
	}

	deleteMaintenance(t, c, name)
	assertSameNodeState(t, node, before, stateOf(t, c, node))
}

// A node deleted in the middle of its drain: the maintenance fails and says
// so, and deleting it lets it go.
func TestNodeDeletedMidDrain(t *testing.T) {
	c := testcluster.Get(t)
	_, node := slowDrain(t, c, "svc", 4, 3*time.Second)
	name := testcluster.UniqueName(t, "gone")
	createMaintenance(t, c, name, node, "")
	waitMaintenance(t, c, name, "drain under way", func(nm *nmv1beta1.NodeMaintenance) bool {
		return nm.Status.Phase == nmv1beta1.MaintenanceRunning && nm.Status.EvictionPods == 4
	})
	if err := c.Client.Delete(bg(), getNode(t, c, node)); err != nil {
		t.Fatal(err)
	}
	nm := waitPhase(t, c, name, nmv1beta1.MaintenanceFailed)
	if !strings.Contains(nm.Status.LastError, node) || !strings.Contains(nm.Status.LastError, "was deleted") {
		t.Errorf("lastError %q does not say node %s was deleted", nm.Status.LastError, node)
	}
	deleteMaintenance(t, c, name)
}

// The node's lease taken by another holder in the middle of the drain: after
// more than 3 failed renewals the maintenance fails, the node is restored
// exactly, and the other holder's lease is left alone.
func TestLeaseStolenMidDrain(t *testing.T) {
	c := testcluster.Get(t)
	_, node := slowDrain(t, c, "svc", 6, 3*time.Second)
	before := settledStateOf(t, c, node)
	name := testcluster.UniqueName(t, "thief")
	createMaintenance(t, c, name, node, "")
	waitMaintenance(t, c, name, "drain under way", func(nm *nmv1beta1.NodeMaintenance) bool {
		return nm.Status.Phase == nmv1beta1.MaintenanceRunning && nm.Status.EvictionPods == 6
	})
	stealLease(t, c, node)
	nm := waitPhase(t, c, name, nmv1beta1.MaintenanceFailed)
	if nm.Status.ErrorOnLeaseCount <= 3 || !strings.Contains(nm.Status.LastError, "node was restored") || !strings.Contains(nm.Status.LastError, "thief") {
		t.Errorf("failed status should count >3 lease errors, name the holder and say the node was restored: %+v", nm.Status)
	}
	assertSameNodeState(t, node, before, stateOf(t, c, node))
	if l, err := getLease(c, node); err != nil || ptr.Deref(l.Spec.HolderIdentity, "") != "thief" {
		t.Errorf("the thief's lease must be left alone: %v %v", l, err)
	}
}

// A PDB that never allows an eviction: the maintenance stays Running for as
// long as it takes, its lastError names the PDB and pendingPods the pod; the
// pod is never deleted, and delete gives the node back.
func TestPDBThatNeverAllows(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	const pdb = "db" // CreatePDB names the PDB after its app
	node := deploymentNode(t, c, ns, pdb, 1, ptr.To(intstr.FromInt32(1)), nil)
	pods, err := c.PodsOnNode(bg(), node)
	if err != nil || len(pods) != 1 {
		t.Fatalf("pods on %s: %v %v", node, podNames(pods), err)
	}
	pod := pods[0]
	before := settledStateOf(t, c, node)

	name := testcluster.UniqueName(t, "blocked")
	createMaintenance(t, c, name, node, "")
	blocked := func(nm *nmv1beta1.NodeMaintenance) error {
		switch {
		case nm.Status.Phase != nmv1beta1.MaintenanceRunning:
			return fmt.Errorf("phase %q, want Running", nm.Status.Phase)
		case !strings.Contains(nm.Status.LastError, pdb) || !strings.Contains(nm.Status.LastError, pod.Name):
			return fmt.Errorf("lastError %q does not name PDB %s and pod %s", nm.Status.LastError, pdb, pod.Name)
		case !slices.Equal(nm.Status.PendingPods, []string{pod.Name}):
			return fmt.Errorf("pendingPods %v, want [%s]", nm.Status.PendingPods, pod.Name)
		}
		return nil
	}
	waitMaintenance(t, c, name, "blocked by the PDB", func(nm *nmv1beta1.NodeMaintenance) bool { return blocked(nm) == nil })
	// Still so after several eviction retries.
	time.Sleep(8 * time.Second)
	if err := blocked(getMaintenance(t, c, name)); err != nil {
		t.Error(err)
	}
	if got := &(corev1.Pod{}); c.Client.Get(bg(), client.ObjectKey{Namespace: pod.Namespace, Name: pod.Name}, got) != nil || got.DeletionTimestamp != nil {
		t.Errorf("pod %s/%s protected by the PDB was deleted", pod.Namespace, pod.Name)
	}
	deleteMaintenance(t, c, name)
	assertSameNodeState(t, node, before, stateOf(t, c, node))
}

// An eviction cut off between the API server charging the budget and
// deleting the pod (the evicting client killed mid-call, as
// TestOperatorKilledFiveTimesMidDrain does at random) leaves the pod in the
// budget's disruptedPods while it keeps running: the budget refuses every
// eviction until kube-controller-manager drops the entry two minutes later.
// The test writes that entry itself, as the API server leaves it: the
// maintenance stays Running and lastError says what holds the budget and
// until when; once the entry is gone the drain finishes.
func TestInterruptedEvictionIsExplained(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	const app = "web" // CreatePDB names the PDB after its app
	node := deploymentNode(t, c, ns, app, 3, nil, ptr.To(intstr.FromInt32(1)))
	pods, err := c.PodsOnNode(bg(), node)
	if err != nil || len(pods) != 3 {
		t.Fatalf("pods on %s: %v %v", node, podNames(pods), err)
	}
	before := settledStateOf(t, c, node)
	cutOff := pods[0].Name
	setDisruptedPods(t, c, ns, app, map[string]metav1.Time{cutOff: metav1.NewTime(time.Now().Add(-15 * time.Second))})

	name := testcluster.UniqueName(t, "interrupted")
	createMaintenance(t, c, name, node, "")
	nm := waitMaintenance(t, c, name, "lastError explains the charged budget", func(nm *nmv1beta1.NodeMaintenance) bool {
		return nm.Status.Phase == nmv1beta1.MaintenanceRunning &&
			strings.Contains(nm.Status.LastError, "PodDisruptionBudget "+ns+"/"+app+" counts pod "+ns+"/"+cutOff+" as disrupted") &&
			strings.Contains(nm.Status.LastError, "not terminating")
	})
	t.Logf("lastError: %s", nm.Status.LastError)
	if len(nm.Status.PendingPods) != 3 {
		t.Errorf("pendingPods %v: the budget allowed an eviction while charged for %s", nm.Status.PendingPods, cutOff)
	}

	setDisruptedPods(t, c, ns, app, nil) // what the disruption controller does after two minutes
	nm = waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
	if nm.Status.LastError != "" || nm.Status.EvictionPods != 3 {
		t.Errorf("status after the budget was released: %+v", nm.Status)
	}
	deleteMaintenance(t, c, name)
	assertSameNodeState(t, node, before, stateOf(t, c, node))
}

// setDisruptedPods writes a budget's status.disruptedPods, as the eviction
// subresource does, and waits until the disruption controller has counted it.
func setDisruptedPods(t *testing.T, c *testcluster.Cluster, ns, name string, disrupted map[string]metav1.Time) {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{}
	key := client.ObjectKey{Namespace: ns, Name: name}
	// The budget must be settled first, or the controller's first status
	// write would replace ours.
	testcluster.WaitFor(t, time.Minute, "PDB "+name+" to be observed", func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, key, pdb); err != nil {
			return false, err
		}
		return pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.ExpectedPods > 0, nil
	})
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Client.Get(bg(), key, pdb); err != nil {
			return err
		}
		pdb.Status.DisruptedPods = disrupted
		return c.Client.Status().Update(bg(), pdb)
	})
	if err != nil {
		t.Fatalf("write disruptedPods of PDB %s/%s: %v", ns, name, err)
	}
	testcluster.WaitFor(t, time.Minute, "PDB "+name+" to count its disrupted pods", func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, key, pdb); err != nil {
			return false, err
		}
		want := max(0, pdb.Status.ExpectedPods-pdb.Status.DesiredHealthy-int32(len(disrupted)))
		if pdb.Status.ObservedGeneration == pdb.Generation && len(pdb.Status.DisruptedPods) == len(disrupted) && pdb.Status.DisruptionsAllowed == want {
			return true, nil
		}
		return false, fmt.Errorf("status %+v, want %d disruptions allowed", pdb.Status, want)
	})
}
