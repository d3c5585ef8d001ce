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
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
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
}

func stateOf(t *testing.T, c *testcluster.Cluster, node string) nodeState {
	t.Helper()
	n := getNode(t, c, node)
	return nodeState{n.Spec.Unschedulable, n.Spec.Taints, n.Labels, n.Annotations}
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
	if !reflect.DeepEqual(before, after) {
		t.Errorf("node %s is not restored exactly:\nbefore %+v\nafter  %+v", node, before, after)
	}
}

// assertEvictedOnce reads the API server's audit log: every pod of ns was
// evicted (an eviction the API server accepted) exactly once, and want pods
// were.
func assertEvictedOnce(t *testing.T, c *testcluster.Cluster, ns string, want int) {
	t.Helper()
	events, err := c.AuditEvents(bg())
	if err != nil {
		t.Fatal(err)
	}
	accepted, refused := map[string]int{}, 0
	for _, e := range events {
		r := e.ObjectRef
		if e.Verb != "create" || r.Resource != "pods" || r.Subresource != "eviction" || r.Namespace != ns {
			continue
		}
		if e.ResponseStatus.Code >= 200 && e.ResponseStatus.Code < 300 {
			accepted[r.Name]++
		} else {
			refused++
		}
	}
	for pod, n := range accepted {
		if n > 1 {
			t.Errorf("pod %s/%s was evicted %d times", ns, pod, n)
		}
	}
	if len(accepted) != want {
		t.Errorf("%d pods of %s were evicted, want %d: %v", len(accepted), ns, want, accepted)
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
		var err error
		if operator, err = testoperator.Start(c, defaultOptions()); err != nil {
			t.Errorf("restart the in-process operator: %v", err)
		}
	})
	if err := process.Start(c, slices.Concat(processFlags, extra)...); err != nil {
		t.Fatalf("start the operator binary: %v", err)
	}
	return process
}

// The operator binary is SIGKILLed five times at random points of one drain
// and started again each time: the maintenance still ends Succeeded with the
// right counts, no pod is evicted twice, and delete gives the node back
// exactly as it was.
func TestOperatorKilledFiveTimesMidDrain(t *testing.T) {
	c := testcluster.Get(t)
	const pods = 8
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
	nm := waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
	if nm.Status.TotalPods != pods || nm.Status.EvictionPods != pods || nm.Status.DrainProgress != 100 || len(nm.Status.PendingPods) != 0 {
		t.Errorf("counts after five kills: %+v, want %d pods, all evicted", nm.Status, pods)
	}
	assertEvictedOnce(t, c, ns, pods)
	deleteMaintenance(t, c, name)
	assertSameNodeState(t, node, before, stateOf(t, c, node))
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

			name := testcluster.UniqueName(t, "restart")
			createMaintenance(t, c, name, node, "")
			waitMaintenance(t, c, name, "drain under way", func(nm *nmv1beta1.NodeMaintenance) bool {
				return nm.Status.Phase == nmv1beta1.MaintenanceRunning && nm.Status.EvictionPods == pods && len(nm.Status.PendingPods) < pods
			})
			// A second of grace: a terminating API server still serves the
			// open connections, and the drain must not finish in the meantime.
			restart, err := c.RestartAPIServer(bg(), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			nm := getMaintenance(t, c, name)
			t.Logf("kube-apiserver restarted: unreachable for %s (also restarted: %v); then phase=%q, %d of %d pods pending", restart.Outage.Round(time.Millisecond), restart.Restarted, nm.Status.Phase, len(nm.Status.PendingPods), nm.Status.EvictionPods)
			if nm.Status.Phase != nmv1beta1.MaintenanceRunning {
				t.Fatalf("the drain was over (%s) when the API server came back: the scenario must be slower", nm.Status.Phase)
			}

			nm = waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
			if nm.Status.TotalPods != pods || nm.Status.EvictionPods != pods || nm.Status.DrainProgress != 100 || len(nm.Status.PendingPods) != 0 {
				t.Errorf("counts after the restart: %+v, want %d pods, all evicted", nm.Status, pods)
			}
			if !p.Running() || p.Pid() != pid {
				t.Errorf("the operator (pid %d) did not ride out the restart; its log: %s", pid, p.LogPath)
			}
			assertEvictedOnce(t, c, ns, pods)
			deleteMaintenance(t, c, name)
			assertSameNodeState(t, node, before, stateOf(t, c, node))
		})
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
