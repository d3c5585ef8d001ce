package e2e

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/webhook"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testoperator"
)

// The seed example on a node with a Deployment, a DaemonSet, a bare pod and a
// pod with an emptyDir: Succeeded with the right counts, DaemonSet pod kept,
// everything else evicted, node cordoned/tainted/labelled, lease held; after
// delete the node is schedulable again and the lease gone.
func TestSeedExampleDrainsAndRestores(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "node02").Name
	c.CreateDeployment(t, ns, "web", 3, pool.Selector())
	c.CreateDaemonSet(t, ns, "agent", pool.Selector())
	c.CreateBarePod(t, ns, "bare", node)
	c.CreateBarePod(t, ns, "scratch", node, testcluster.WithEmptyDir())
	c.WaitRunningPods(t, ns, "web", node, 3)
	c.WaitRunningPods(t, ns, "agent", node, 1)
	c.WaitRunningPods(t, ns, "bare", node, 1)
	c.WaitRunningPods(t, ns, "scratch", node, 1)
	pool.AddNode(t, "") // room for the Deployment's replacements

	createMaintenance(t, c, "maintain-node02", node, "硬體更換 - RAM 升級")
	nm := waitPhase(t, c, "maintain-node02", nmv1beta1.MaintenanceSucceeded)

	if nm.Status.TotalPods != 6 || nm.Status.EvictionPods != 5 {
		t.Errorf("totalPods=%d evictionPods=%d, want 6 and 5 (3 web, bare, scratch; the DaemonSet pod stays)", nm.Status.TotalPods, nm.Status.EvictionPods)
	}
	if nm.Status.DrainProgress != 100 || len(nm.Status.PendingPods) != 0 || nm.Status.LastError != "" || nm.Status.LastUpdate.IsZero() {
		t.Errorf("succeeded status incomplete: %+v", nm.Status)
	}
	if nm.Spec.Reason != "硬體更換 - RAM 升級" {
		t.Errorf("reason changed: %q", nm.Spec.Reason)
	}
	pods, err := c.PodsOnNode(bg(), node)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 1 || pods[0].Labels["app"] != "agent" {
		t.Errorf("only the DaemonSet pod should be left on %s, found %v", node, podNames(pods))
	}
	assertInMaintenance(t, getNode(t, c, node))
	l, err := getLease(c, node)
	if err != nil {
		t.Fatalf("lease for %s: %v", node, err)
	}
	if ptr.Deref(l.Spec.HolderIdentity, "") != lease.Holder {
		t.Errorf("lease holder %q, want %q", ptr.Deref(l.Spec.HolderIdentity, ""), lease.Holder)
	}

	deleteMaintenance(t, c, "maintain-node02")
	assertRestored(t, getNode(t, c, node))
	if _, err := getLease(c, node); !apierrors.IsNotFound(err) {
		t.Errorf("lease for %s should be released after the maintenance, got %v", node, err)
	}
}

// A Deployment under a PDB with maxUnavailable 1 drains one pod at a time:
// the operator never has two pods of it terminating at once, and succeeds.
func TestPDBDrainsPodByPod(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	node := deploymentNode(t, c, ns, "api", 5, nil, ptr.To(intstr.FromInt32(1)))

	var mu sync.Mutex
	maxTerminating := 0
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			pods, err := c.PodsOnNode(bg(), node)
			if err != nil {
				continue
			}
			n := 0
			for _, p := range pods {
				if p.DeletionTimestamp != nil {
					n++
				}
			}
			mu.Lock()
			maxTerminating = max(maxTerminating, n)
			mu.Unlock()
		}
	}()

	name := testcluster.UniqueName(t, "pdb")
	createMaintenance(t, c, name, node, "")
	nm := waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
	close(stop)
	<-watched
	if nm.Status.EvictionPods != 5 {
		t.Errorf("evictionPods=%d, want 5", nm.Status.EvictionPods)
	}
	if maxTerminating > 1 {
		t.Errorf("saw %d pods terminating at once; the PDB allows one", maxTerminating)
	}
}

// A pod whose termination takes seconds keeps the maintenance Running, listed
// in pendingPods, with progress between 0 and 100, until it is gone.
func TestSlowTerminationKeepsRunningWithProgress(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	c.CreateBarePod(t, ns, "quick", node)
	c.CreateBarePod(t, ns, "slow", node, testcluster.WithTerminationDelay(6*time.Second))
	c.WaitRunningPods(t, ns, "slow", node, 1)
	c.WaitRunningPods(t, ns, "quick", node, 1)

	name := testcluster.UniqueName(t, "slow")
	createMaintenance(t, c, name, node, "")
	mid := waitMaintenance(t, c, name, "only the slow pod pending", func(nm *nmv1beta1.NodeMaintenance) bool {
		return nm.Status.Phase == nmv1beta1.MaintenanceRunning && slices.Equal(nm.Status.PendingPods, []string{"slow"})
	})
	if mid.Status.DrainProgress != 50 {
		t.Errorf("drainProgress=%d with one of two pods gone, want 50", mid.Status.DrainProgress)
	}
	if want := []nmv1beta1.PodReference{{Namespace: ns, Name: "slow"}}; !slices.Equal(mid.Status.PendingPodsRefs, want) {
		t.Errorf("pendingPodsRefs=%v, want %v", mid.Status.PendingPodsRefs, want)
	}
	pods, _ := c.PodsOnNode(bg(), node)
	if len(pods) != 1 || pods[0].DeletionTimestamp == nil {
		t.Errorf("the slow pod should be terminating on the node, pods: %v", podNames(pods))
	}
	waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
}

// A node cordoned by someone else, with a foreign taint and label, gets back
// exactly that after the maintenance: still cordoned, foreign taint kept,
// our drain taint and label gone.
func TestRestoreKeepsPriorCordonAndForeignTaints(t *testing.T) {
	c := testcluster.Get(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "")
	foreign := corev1.Taint{Key: "example.com/foreign", Value: "x", Effect: corev1.TaintEffectNoExecute}
	orig := node.DeepCopy()
	node.Spec.Unschedulable = true
	node.Spec.Taints = append(node.Spec.Taints, foreign)
	node.Labels["example.com/team"] = "storage"
	if err := c.Client.Patch(bg(), node, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}

	name := testcluster.UniqueName(t, "cordoned")
	createMaintenance(t, c, name, node.Name, "")
	waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
	during := getNode(t, c, node.Name)
	assertInMaintenance(t, during)

	// A taint added by someone else during the maintenance must survive too.
	late := corev1.Taint{Key: "example.com/late", Effect: corev1.TaintEffectPreferNoSchedule}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := getNode(t, c, node.Name)
		before := n.DeepCopy()
		n.Spec.Taints = append(n.Spec.Taints, late)
		return c.Client.Patch(bg(), n, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		t.Fatal(err)
	}

	deleteMaintenance(t, c, name)
	after := getNode(t, c, node.Name)
	if !after.Spec.Unschedulable {
		t.Error("the node was cordoned before the maintenance and must stay cordoned")
	}
	if !hasTaint(after, foreign.Key, foreign.Effect) || !hasTaint(after, late.Key, late.Effect) {
		t.Errorf("foreign taints lost: %v", after.Spec.Taints)
	}
	if hasTaint(after, nodestate.DrainTaintKey, corev1.TaintEffectNoSchedule) {
		t.Errorf("drain taint left behind: %v", after.Spec.Taints)
	}
	if _, ok := after.Labels[nodestate.ExcludeFromRemediationLabel]; ok {
		t.Error("exclude-from-remediation label left behind")
	}
	if after.Labels["example.com/team"] != "storage" {
		t.Error("foreign label lost")
	}
}

// The webhook: unknown node, invalid name, duplicate and nodeName update are
// refused with clear messages; the update message is the medik8s one exactly.
func TestWebhookRejectsBadRequests(t *testing.T) {
	c := testcluster.Get(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	name := testcluster.UniqueName(t, "first")
	createMaintenance(t, c, name, node, "")

	tests := []struct {
		name, nodeName, want string
	}{
		{"unknown node", "node-that-does-not-exist", `node "node-that-does-not-exist" does not exist`},
		{"invalid node name", "Node_02", `spec.nodeName "Node_02" is not a valid node name`},
		{"duplicate", node, fmt.Sprintf("node %q is already in maintenance by NodeMaintenance %q", node, name)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: testcluster.UniqueName(t, "bad")}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: tt.nodeName}}
			err := c.Client.Create(bg(), nm)
			if err == nil {
				_ = c.Client.Delete(bg(), nm)
				t.Fatal("the create was admitted")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not say %q", err, tt.want)
			}
		})
	}

	t.Run("nodeName update", func(t *testing.T) {
		other := pool.AddNode(t, "").Name
		// The operator writes the object too; a conflict is not the answer
		// under test, so retry until the webhook answers.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			nm := getMaintenance(t, c, name)
			nm.Spec.NodeName = other
			return c.Client.Update(bg(), nm)
		})
		if err == nil {
			t.Fatal("changing spec.nodeName was admitted")
		}
		if !strings.HasSuffix(err.Error(), webhook.ErrNodeNameImmutable) {
			t.Fatalf("error %q does not end with %q", err, webhook.ErrNodeNameImmutable)
		}
		if got := getMaintenance(t, c, name); got.Spec.NodeName != node {
			t.Fatalf("nodeName changed to %q", got.Spec.NodeName)
		}
	})

	t.Run("reason update is allowed", func(t *testing.T) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			nm := getMaintenance(t, c, name)
			nm.Spec.Reason = "new reason"
			return c.Client.Update(bg(), nm)
		})
		if err != nil {
			t.Fatalf("updating the reason was refused: %v", err)
		}
	})
}

// A server-side dry run (kubectl apply --dry-run=server, a GitOps tool's
// diff) is answered as a create, and holds nothing: a create of another
// name for the same node right after it is admitted. A dry run for a node
// in maintenance gets the refusal a create would.
func TestDryRunCreateHoldsNothing(t *testing.T) {
	c := testcluster.Get(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	dry := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: testcluster.UniqueName(t, "dry")}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node}}
	if err := c.Client.Create(bg(), dry, client.DryRunAll); err != nil {
		t.Fatalf("dry run of a create for node %s refused: %v", node, err)
	}
	name := testcluster.UniqueName(t, "real")
	createMaintenance(t, c, name, node, "after a dry run")
	waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)

	again := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: testcluster.UniqueName(t, "dry")}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node}}
	err := c.Client.Create(bg(), again, client.DryRunAll)
	if want := fmt.Sprintf("node %q is already in maintenance by NodeMaintenance %q", node, name); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("dry run for a node in maintenance: %v, want %q", err, want)
	}
}

// Two creates for one node at the same moment: exactly one is admitted.
func TestRacingCreatesAdmitOne(t *testing.T) {
	c := testcluster.Get(t)
	pool := c.NewPool(t)
	for round := 0; round < 3; round++ {
		node := pool.AddNode(t, "").Name
		var wg sync.WaitGroup
		errs := make([]error, 4)
		names := make([]string, len(errs))
		for i := range errs {
			names[i] = testcluster.UniqueName(t, "race")
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				errs[i] = c.Client.Create(bg(), &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: names[i]}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node}})
			}(i)
		}
		wg.Wait()
		admitted := 0
		for i, err := range errs {
			if err == nil {
				admitted++
				t.Cleanup(func() { deleteMaintenance(t, c, names[i]) })
			} else if !strings.Contains(err.Error(), "already in maintenance") {
				t.Errorf("unexpected refusal: %v", err)
			}
		}
		if admitted != 1 {
			t.Fatalf("round %d: %d of %d racing creates for node %s were admitted, want exactly 1", round, admitted, len(errs), node)
		}
	}
}

// A lease held by another holder keeps the maintenance Running with a
// lastError naming the holder and leaves the node alone; once released the
// maintenance proceeds and succeeds.
func TestLeaseHeldByOtherWaitsThenSucceeds(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	c.CreateBarePod(t, ns, "one", node)
	c.CreateBarePod(t, ns, "two", node)
	c.WaitRunningPods(t, ns, "one", node, 1)
	c.WaitRunningPods(t, ns, "two", node, 1)
	holdAs(t, c, node, "self-node-remediation")

	name := testcluster.UniqueName(t, "leased")
	createMaintenance(t, c, name, node, "")
	nm := waitMaintenance(t, c, name, "lastError naming the lease holder", func(nm *nmv1beta1.NodeMaintenance) bool {
		return strings.Contains(nm.Status.LastError, `held by "self-node-remediation"`)
	})
	if nm.Status.Phase != nmv1beta1.MaintenanceRunning {
		t.Errorf("phase %q while waiting for the lease, want Running", nm.Status.Phase)
	}
	if n := getNode(t, c, node); n.Spec.Unschedulable {
		t.Error("the node was cordoned although another holder has its lease")
	}

	l, err := getLease(c, node)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Delete(bg(), l); err != nil {
		t.Fatal(err)
	}
	nm = waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
	if nm.Status.LastError != "" || nm.Status.ErrorOnLeaseCount != 0 {
		t.Errorf("lease problem not cleared after success: %+v", nm.Status)
	}
	// The counts are taken when the drain starts, not when the wait began.
	if nm.Status.TotalPods != 2 || nm.Status.EvictionPods != 2 {
		t.Errorf("totalPods=%d evictionPods=%d after waiting for the lease, want 2 and 2", nm.Status.TotalPods, nm.Status.EvictionPods)
	}
	if l, err := getLease(c, node); err != nil || ptr.Deref(l.Spec.HolderIdentity, "") != lease.Holder {
		t.Errorf("lease should now be ours: %v %v", l, err)
	}
}

// A lease stolen after the drain started: more than 3 failures restore the
// node and fail the maintenance.
func TestLeaseStolenFailsAndRestores(t *testing.T) {
	c := testcluster.Get(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	name := testcluster.UniqueName(t, "stolen")
	createMaintenance(t, c, name, node, "")
	waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)

	// Steal it: another holder with a fresh renewTime. The package operator
	// renews every LeaseDuration/3 (10s); a reconcile is forced by touching
	// the NodeMaintenance.
	stealLease(t, c, node)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		nm := getMaintenance(t, c, name)
		nm.Annotations["test/poke"] = "1"
		return c.Client.Update(bg(), nm)
	})
	if err != nil {
		t.Fatal(err)
	}
	nm := waitPhase(t, c, name, nmv1beta1.MaintenanceFailed)
	if nm.Status.ErrorOnLeaseCount <= 3 || !strings.Contains(nm.Status.LastError, "node was restored") {
		t.Errorf("failed status should count >3 lease errors and say the node was restored: %+v", nm.Status)
	}
	assertRestored(t, getNode(t, c, node))
	if l, err := getLease(c, node); err != nil || ptr.Deref(l.Spec.HolderIdentity, "") != "thief" {
		t.Errorf("the thief's lease must be left alone: %v %v", l, err)
	}
}

func holdAs(t *testing.T, c *testcluster.Cluster, node, holder string) {
	t.Helper()
	m := &lease.Manager{Client: c.Client, Duration: time.Hour}
	if err := m.Obtain(bg(), node); err != nil {
		t.Fatal(err)
	}
	l, err := getLease(c, node)
	if err != nil {
		t.Fatal(err)
	}
	l.Spec.HolderIdentity = ptr.To(holder)
	if err := c.Client.Update(bg(), l); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if l, err := getLease(c, node); err == nil && ptr.Deref(l.Spec.HolderIdentity, "") == holder {
			_ = c.Client.Delete(bg(), l)
		}
	})
}

// Ten nodes in maintenance at once all succeed.
func TestTenNodesAtOnce(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	var names []string
	for i := 0; i < 10; i++ {
		names = append(names, deploymentNode(t, c, ns, fmt.Sprintf("app%d", i), 3, nil, nil))
	}
	var nms []string
	for _, node := range names {
		name := "ten-" + node
		createMaintenance(t, c, name, node, "")
		nms = append(nms, name)
	}
	for _, name := range nms {
		nm := waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
		if nm.Status.EvictionPods != 3 {
			t.Errorf("%s: evictionPods=%d, want 3", name, nm.Status.EvictionPods)
		}
	}
}

// The operator stopped mid-drain and started again resumes and succeeds,
// with counts taken once. A budget that allows no disruption holds the drain
// mid-way (kwok replaces evicted pods too fast to catch a drain in flight
// otherwise); it is relaxed while the operator is down.
func TestOperatorRestartMidDrainResumes(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	node := deploymentNode(t, c, ns, "svc", 4, nil, ptr.To(intstr.FromInt32(0)))
	waitBudget(t, c, ns, "svc", 4)

	name := testcluster.UniqueName(t, "restart")
	createMaintenance(t, c, name, node, "")
	waitMaintenance(t, c, name, "drain held by the budget", func(nm *nmv1beta1.NodeMaintenance) bool {
		return nm.Status.Phase == nmv1beta1.MaintenanceRunning && nm.Status.EvictionPods == 4 && len(nm.Status.PendingPods) == 4
	})
	operator.Stop()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := c.Client.Get(bg(), client.ObjectKey{Namespace: ns, Name: "svc"}, pdb); err != nil {
			return err
		}
		pdb.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		return c.Client.Update(bg(), pdb)
	})
	if err != nil {
		t.Fatalf("relax PodDisruptionBudget %s/svc: %v", ns, err)
	}
	if operator, err = testoperator.Start(c, defaultOptions()); err != nil {
		t.Fatal(err)
	}
	nm := waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
	if nm.Status.EvictionPods != 4 || nm.Status.TotalPods != 4 {
		t.Errorf("counts changed across the restart: %+v", nm.Status)
	}
}

// --max-unavailable with --max-unavailable-policy=Refuse refuses a create
// beyond the limit, naming the limit and the nodes already in maintenance.
// (TestMaxUnavailableQueue covers the default policy, Queue.)
func TestMaxUnavailable(t *testing.T) {
	c := testcluster.Get(t)
	o := defaultOptions()
	var existing nmv1beta1.NodeMaintenanceList
	if err := c.Client.List(bg(), &existing); err != nil {
		t.Fatal(err)
	}
	limit := len(existing.Items) + 1
	o.MaxUnavailable = fmt.Sprint(limit)
	o.MaxUnavailablePolicy = validation.MaxUnavailableRefuse
	restartOperator(t, c, o)

	pool := c.NewPool(t)
	first, second := pool.AddNode(t, "").Name, pool.AddNode(t, "").Name
	name := testcluster.UniqueName(t, "limit")
	createMaintenance(t, c, name, first, "")
	err := c.Client.Create(bg(), &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: testcluster.UniqueName(t, "over")}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: second}})
	if err == nil {
		t.Fatal("a create beyond --max-unavailable was admitted")
	}
	for _, want := range []string{fmt.Sprintf("--max-unavailable=%d", limit), first, name} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not mention %q", err, want)
		}
	}
}

// A node deleted during the maintenance fails it with a clear lastError, and
// deleting the NodeMaintenance then just cleans up.
func TestNodeDeletedDuringMaintenance(t *testing.T) {
	c := testcluster.Get(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "")
	name := testcluster.UniqueName(t, "vanish")
	createMaintenance(t, c, name, node.Name, "")
	waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
	if err := c.Client.Delete(bg(), node); err != nil {
		t.Fatal(err)
	}
	nm := waitPhase(t, c, name, nmv1beta1.MaintenanceFailed)
	if !strings.Contains(nm.Status.LastError, "was deleted") {
		t.Errorf("lastError %q does not say the node was deleted", nm.Status.LastError)
	}
	deleteMaintenance(t, c, name)
}

// An expired lease of another holder is taken over at once.
func TestExpiredLeaseIsTakenOver(t *testing.T) {
	c := testcluster.Get(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	holdAs(t, c, node, "someone-gone")
	l, err := getLease(c, node)
	if err != nil {
		t.Fatal(err)
	}
	l.Spec.LeaseDurationSeconds = ptr.To[int32](60)
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(-2 * time.Hour)}
	if err := c.Client.Update(bg(), l); err != nil {
		t.Fatal(err)
	}
	name := testcluster.UniqueName(t, "expired")
	createMaintenance(t, c, name, node, "")
	nm := waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
	if nm.Status.LastError != "" {
		t.Errorf("lastError %q after taking over an expired lease", nm.Status.LastError)
	}
	got, err := getLease(c, node)
	if err != nil || ptr.Deref(got.Spec.HolderIdentity, "") != lease.Holder || ptr.Deref(got.Spec.LeaseTransitions, 0) < 1 {
		t.Errorf("lease not taken over: %+v, %v", got.Spec, err)
	}
}
