package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/ledger"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/manager"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/nodeguard"
	nmwebhook "github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/webhook"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testoperator"
)

// replicas are two webhook validators as two operator replicas run them:
// each with its own process memory and informer cache, both reading and
// writing the real API server. Calling them directly spreads racing creates
// over both replicas for certain, which a Service in front of them would
// only do by chance.
func replicas(t *testing.T, c *testcluster.Cluster, maxUnavailable *intstr.IntOrString) [2]*nmwebhook.Validator {
	var out [2]*nmwebhook.Validator
	for i := range out {
		out[i] = &nmwebhook.Validator{Reader: c.Client, Writer: c.Client, Cache: informerCache(t, c), MaxUnavailable: maxUnavailable}
	}
	return out
}

// informerCache is a replica's own informer cache of the nodes (with the
// guards' index) and the NodeMaintenances, as the manager makes it, synced.
func informerCache(t *testing.T, c *testcluster.Cluster) cache.Cache {
	t.Helper()
	ctx, cancel := context.WithCancel(bg())
	t.Cleanup(cancel)
	informers, err := cache.New(c.RESTConfig, cache.Options{Scheme: manager.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := nodeguard.Register(ctx, informers); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{&corev1.Node{}, &nmv1beta1.NodeMaintenance{}} {
		if _, err := informers.GetInformer(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		if err := informers.Start(ctx); err != nil {
			t.Errorf("informer cache: %v", err)
		}
	}()
	if !informers.WaitForCacheSync(ctx) {
		t.Fatal("the informer cache did not sync")
	}
	return informers
}

// race asks the replicas, alternately and all at once, to admit one create
// per node in nodes, and returns the names admitted. Nothing is created:
// the test's cleanup takes the admissions out of the ledger again, so that
// they do not hold their nodes for ledger.TTL after the test.
func race(t *testing.T, c *testcluster.Cluster, v [2]*nmwebhook.Validator, nodes []string) []string {
	t.Helper()
	var (
		mu       sync.Mutex
		admitted []string
		wg       sync.WaitGroup
	)
	for i, node := range nodes {
		name := testcluster.UniqueName(t, "replica")
		wg.Add(1)
		go func() {
			defer wg.Done()
			nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node}}
			_, err := v[i%2].ValidateCreate(bg(), nm)
			switch {
			case err == nil:
				mu.Lock()
				admitted = append(admitted, name)
				mu.Unlock()
				t.Cleanup(func() {
					if err := (&ledger.Ledger{Reader: c.Client, Writer: c.Client}).Release(bg(), node, name); err != nil {
						t.Errorf("release the admission of %s: %v", name, err)
					}
				})
			case !strings.Contains(err.Error(), "already in maintenance") && !strings.Contains(err.Error(), "--max-unavailable"):
				t.Errorf("replica %d refused %s for node %s with an unexpected error: %v", i%2, name, node, err)
			}
		}()
	}
	wg.Wait()
	return admitted
}

// Four creates for one node racing through two replicas: exactly one is
// admitted, every round.
func TestReplicasAdmitOneCreatePerNode(t *testing.T) {
	c := testcluster.Get(t)
	pool := c.NewPool(t)
	v := replicas(t, c, nil)
	for round := range 20 {
		node := pool.AddNode(t, "").Name
		if admitted := race(t, c, v, []string{node, node, node, node}); len(admitted) != 1 {
			t.Fatalf("round %d: %d of 4 racing creates for node %s were admitted through two replicas (%v), want exactly 1", round, len(admitted), node, admitted)
		}
	}
}

// Six creates for six nodes racing through two replicas with room for two
// more maintenances: exactly two are admitted.
func TestReplicasHoldMaxUnavailable(t *testing.T) {
	c := testcluster.Get(t)
	var existing nmv1beta1.NodeMaintenanceList
	if err := c.Client.List(bg(), &existing); err != nil {
		t.Fatal(err)
	}
	limit := intstr.FromInt32(int32(len(existing.Items) + 2))
	v := replicas(t, c, &limit)
	pool := c.NewPool(t)
	var nodes []string
	for range 6 {
		nodes = append(nodes, pool.AddNode(t, "").Name)
	}
	if admitted := race(t, c, v, nodes); len(admitted) != 2 {
		t.Fatalf("%d of 6 racing creates were admitted through two replicas with --max-unavailable=%s and %d maintenances already (%v), want exactly 2",
			len(admitted), limit.String(), len(existing.Items), admitted)
	}
}

// Two operator processes with leader election; the leader is SIGKILLed in
// the middle of a drain. The standby takes the leader lease over and
// finishes the drain: Succeeded with the right counts, each pod evicted
// once, and delete restores the node exactly.
func TestLeaderKilledMidDrainStandbyFinishes(t *testing.T) {
	c := testcluster.Get(t)
	const pods = 6
	ns, node := slowDrain(t, c, "ha", pods, 2*time.Second)
	before := settledStateOf(t, c, node)
	leader, electionNS, first := runLeaderAndStandby(t, c)

	name := testcluster.UniqueName(t, "failover")
	createMaintenance(t, c, name, node, "")
	waitMaintenance(t, c, name, "drain under way", func(nm *nmv1beta1.NodeMaintenance) bool {
		return nm.Status.Phase == nmv1beta1.MaintenanceRunning && nm.Status.EvictionPods == pods && len(nm.Status.PendingPods) < pods
	})
	leader.Kill()
	t.Logf("leader %s killed", first)
	second := leaderOf(t, c, electionNS, first)
	t.Logf("standby %s took over", second)

	finishSlowDrain(t, c, name, ns, node, pods, before, "the failover")
}

// runLeaderAndStandby runs two operator binaries with leader election in a
// namespace of their own: the first (runOperatorProcess) and, once it
// leads, a standby. It returns the leader, the election namespace and the
// leader's identity in the lease.
func runLeaderAndStandby(t *testing.T, c *testcluster.Cluster) (leader *testoperator.Process, electionNS, identity string) {
	t.Helper()
	electionNS = c.Namespace(t)
	elect := []string{"--leader-elect", "--namespace=" + electionNS}
	leader = runOperatorProcess(t, c, elect...)
	identity = leaderOf(t, c, electionNS, "")

	dir := t.TempDir()
	standby := &testoperator.Process{Bin: leader.Bin, Dir: dir, LogPath: filepath.Join(dir, "operator.log")}
	if err := standby.Start(c, slices.Concat(processFlags, elect)...); err != nil {
		t.Fatalf("start the standby operator: %v", err)
	}
	t.Cleanup(func() {
		standby.Stop()
		if t.Failed() {
			logTail(t, standby.LogPath, 60)
		}
	})
	return leader, electionNS, identity
}

// Two operator processes with leader election; the leader is SIGKILLed
// while a rollout has a node done and others in progress. The standby takes
// the leader lease over and finishes the rollout from its status: each node
// maintained through one NodeMaintenance, never more than maxUnavailable
// nodes of the set out of service, every node restored exactly.
func TestRolloutLeaderKilledStandbyFinishes(t *testing.T) {
	c := testcluster.Get(t)
	pool, nodes, before := poolNodes(t, c, 6)
	leader, electionNS, first := runLeaderAndStandby(t, c)
	watch := watchService(t, c, nodes)
	// Each node holds its slot about 7 s (a 3 s hold and a 1 s soak, each
	// rounded up a second, and the restore): three waves of two, so the
	// kill falls in the second wave and the takeover (up to a lease of 6 s)
	// leaves the third wave to the standby.
	ro := newRollout(t, "ha", nmv1alpha1.NodeMaintenanceRolloutSpec{
		NodeSelector:   &metav1.LabelSelector{MatchLabels: pool.Selector()},
		MaxUnavailable: ptr.To(intstr.FromInt32(2)),
		HoldFor:        &metav1.Duration{Duration: 3 * time.Second},
		SoakFor:        &metav1.Duration{Duration: time.Second},
	})
	createRollout(t, c, ro)
	waitRollout(t, c, 2*time.Minute, ro.Name, "to have nodes done and in progress", func(ro *nmv1alpha1.NodeMaintenanceRollout) bool {
		return ro.Status.Done >= 1 && ro.Status.InProgress >= 1
	})
	leader.Kill()
	// Nothing moves the rollout between the kill and the takeover: what the
	// status says now is what the standby takes over.
	killed := getRollout(t, c, ro.Name)
	t.Logf("leader %s killed with %d nodes done and %d in progress", first, killed.Status.Done, killed.Status.InProgress)
	if killed.Status.InProgress == 0 || killed.Status.Done == killed.Status.Total {
		t.Fatalf("the leader was killed with no node in progress (%+v): the scenario must be slower", killed.Status)
	}
	second := leaderOf(t, c, electionNS, first)
	t.Logf("standby %s took over", second)

	done := waitRollout(t, c, 3*time.Minute, ro.Name, "to succeed after the failover", rolloutPhase(nmv1alpha1.RolloutSucceeded))
	watch.done()
	assertSoaked(t, done, 2, time.Second)
	watch.assertAtMostOutOfService(t, 2)
	watch.assertOneMaintenanceEach(t, nodes)
	assertRestoredAll(t, c, before)
	if done.Status.Done != 6 || done.Status.Failed != 0 {
		t.Errorf("status of the rollout finished by the standby: %+v", done.Status)
	}
	if left := childrenOf(t, c, ro.Name); len(left) != 0 {
		t.Errorf("%d NodeMaintenances of the rollout are left after it succeeded", len(left))
	}
}

// leaderOf waits until the operator's leader-election lease in ns is held by
// someone other than not, and returns the holder.
func leaderOf(t *testing.T, c *testcluster.Cluster, ns, not string) string {
	t.Helper()
	var holder string
	testcluster.WaitFor(t, 2*time.Minute, "a leader other than "+strconv.Quote(not)+" in "+ns, func(ctx context.Context) (bool, error) {
		l := &coordinationv1.Lease{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: manager.DefaultLeaderElectionID}, l); err != nil {
			return false, err
		}
		holder = ptr.Deref(l.Spec.HolderIdentity, "")
		if holder == "" || holder == not {
			return false, fmt.Errorf("held by %q", holder)
		}
		return true, nil
	})
	return holder
}

// A maintenance of the node the operator itself runs on: the operator's own
// pod is evicted only once every other pod has left the node, so the drain
// is carried to its end before the operator moves.
func TestOperatorPodIsEvictedLast(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	o := defaultOptions()
	o.Controller.OperatorDeployment = types.NamespacedName{Namespace: ns, Name: config.OperatorName}
	restartOperator(t, c, o)

	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	c.CreateDeployment(t, ns, config.OperatorName, 1, pool.Selector())
	c.CreateDeployment(t, ns, "app", 3, pool.Selector(), testcluster.WithTerminationDelay(2*time.Second))
	c.WaitRunningPods(t, ns, config.OperatorName, node, 1)
	c.WaitRunningPods(t, ns, "app", node, 3)
	own, others := map[types.UID]bool{}, map[types.UID]bool{}
	for _, p := range podsOn(t, c, ns, node) {
		if strings.HasPrefix(p.Name, config.OperatorName+"-") {
			own[p.UID] = true
		} else {
			others[p.UID] = true
		}
	}
	pool.AddNode(t, "") // where the replacements go

	name := testcluster.UniqueName(t, "self")
	createMaintenance(t, c, name, node, "")
	waitMaintenance(t, c, name, "phase Succeeded, the operator's pod evicted last", func(nm *nmv1beta1.NodeMaintenance) bool {
		ownLeft, othersLeft := true, 0
		for _, p := range podsOn(t, c, ns, node) {
			switch {
			case own[p.UID] && p.DeletionTimestamp == nil:
				ownLeft = false
			case others[p.UID]:
				othersLeft++
			}
		}
		if ownLeft && othersLeft > 0 {
			t.Fatalf("the operator's pod was evicted while %d other pods were still on node %s", othersLeft, node)
		}
		return nm.Status.Phase == nmv1beta1.MaintenanceSucceeded
	})
	deleteMaintenance(t, c, name)
}

func podsOn(t *testing.T, c *testcluster.Cluster, ns, node string) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := c.Client.List(bg(), pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.Spec.NodeName == node {
			out = append(out, p)
		}
	}
	return out
}
