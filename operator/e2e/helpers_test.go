package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

const phaseTimeout = 2 * time.Minute

func bg() context.Context { return context.Background() }

// createMaintenance creates a NodeMaintenance and, at cleanup, deletes it and
// waits until the operator has let it go.
func createMaintenance(t *testing.T, c *testcluster.Cluster, name, node, reason string) *nmv1beta1.NodeMaintenance {
	t.Helper()
	nm := &nmv1beta1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       nmv1beta1.NodeMaintenanceSpec{NodeName: node, Reason: reason},
	}
	if err := c.Client.Create(bg(), nm); err != nil {
		t.Fatalf("create NodeMaintenance %s for node %s: %v", name, node, err)
	}
	t.Cleanup(func() { deleteMaintenance(t, c, name) })
	return nm
}

// deleteMaintenance deletes the NodeMaintenance and waits until it is gone,
// which means the operator restored the node and removed the finalizer.
func deleteMaintenance(t *testing.T, c *testcluster.Cluster, name string) {
	t.Helper()
	nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Client.Delete(bg(), nm); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete NodeMaintenance %s: %v", name, err)
	}
	testcluster.WaitFor(t, phaseTimeout, "NodeMaintenance "+name+" to be gone", func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Name: name}, nm)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

func getMaintenance(t *testing.T, c *testcluster.Cluster, name string) *nmv1beta1.NodeMaintenance {
	t.Helper()
	nm := &nmv1beta1.NodeMaintenance{}
	if err := c.Client.Get(bg(), client.ObjectKey{Name: name}, nm); err != nil {
		t.Fatalf("get NodeMaintenance %s: %v", name, err)
	}
	return nm
}

// waitMaintenance waits until cond holds for the NodeMaintenance and returns it.
func waitMaintenance(t *testing.T, c *testcluster.Cluster, name, what string, cond func(*nmv1beta1.NodeMaintenance) bool) *nmv1beta1.NodeMaintenance {
	t.Helper()
	return waitMaintenanceWithin(t, c, phaseTimeout, name, what, cond)
}

// waitMaintenanceWithin is waitMaintenance with its own timeout.
func waitMaintenanceWithin(t *testing.T, c *testcluster.Cluster, timeout time.Duration, name, what string, cond func(*nmv1beta1.NodeMaintenance) bool) *nmv1beta1.NodeMaintenance {
	t.Helper()
	nm := &nmv1beta1.NodeMaintenance{}
	testcluster.WaitFor(t, timeout, fmt.Sprintf("NodeMaintenance %s: %s", name, what), func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, nm); err != nil {
			return false, err
		}
		if cond(nm) {
			return true, nil
		}
		return false, fmt.Errorf("status now: %+v%s", nm.Status, describePending(ctx, c, nm))
	})
	return nm
}

// describePending says where each pending pod of nm is, and what the PDBs of
// their namespaces allow: what a drain that does not end is waiting for.
func describePending(ctx context.Context, c *testcluster.Cluster, nm *nmv1beta1.NodeMaintenance) string {
	var b strings.Builder
	namespaces := map[string]bool{}
	for _, ref := range nm.Status.PendingPodsRefs {
		namespaces[ref.Namespace] = true
		pod := &corev1.Pod{}
		switch err := c.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, pod); {
		case apierrors.IsNotFound(err):
			fmt.Fprintf(&b, "\n  pod %s/%s: gone", ref.Namespace, ref.Name)
		case err != nil:
			fmt.Fprintf(&b, "\n  pod %s/%s: %v", ref.Namespace, ref.Name, err)
		case pod.DeletionTimestamp != nil:
			fmt.Fprintf(&b, "\n  pod %s/%s: terminating since %s, on node %q, phase %s", ref.Namespace, ref.Name, pod.DeletionTimestamp.Format(time.RFC3339), pod.Spec.NodeName, pod.Status.Phase)
		default:
			fmt.Fprintf(&b, "\n  pod %s/%s: not terminating, on node %q, phase %s", ref.Namespace, ref.Name, pod.Spec.NodeName, pod.Status.Phase)
		}
	}
	for ns := range namespaces {
		pdbs := &policyv1.PodDisruptionBudgetList{}
		if err := c.Client.List(ctx, pdbs, client.InNamespace(ns)); err != nil {
			fmt.Fprintf(&b, "\n  PDBs of %s: %v", ns, err)
			continue
		}
		for _, pdb := range pdbs.Items {
			st := pdb.Status
			fmt.Fprintf(&b, "\n  PDB %s/%s: %d healthy of %d desired, %d disruptions allowed, disrupted %v, observed generation %d of %d",
				ns, pdb.Name, st.CurrentHealthy, st.DesiredHealthy, st.DisruptionsAllowed, st.DisruptedPods, st.ObservedGeneration, pdb.Generation)
		}
	}
	return b.String()
}

func waitPhase(t *testing.T, c *testcluster.Cluster, name string, phase nmv1beta1.MaintenancePhase) *nmv1beta1.NodeMaintenance {
	t.Helper()
	return waitMaintenance(t, c, name, "phase "+string(phase), func(nm *nmv1beta1.NodeMaintenance) bool {
		return nm.Status.Phase == phase
	})
}

func getNode(t *testing.T, c *testcluster.Cluster, name string) *corev1.Node {
	t.Helper()
	node := &corev1.Node{}
	if err := c.Client.Get(bg(), client.ObjectKey{Name: name}, node); err != nil {
		t.Fatalf("get node %s: %v", name, err)
	}
	return node
}

func hasTaint(node *corev1.Node, key string, effect corev1.TaintEffect) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == key && t.Effect == effect {
			return true
		}
	}
	return false
}

// assertInMaintenance checks the node carries the whole maintenance state.
func assertInMaintenance(t *testing.T, node *corev1.Node) {
	t.Helper()
	if !node.Spec.Unschedulable {
		t.Errorf("node %s is not cordoned", node.Name)
	}
	for _, mt := range nodestate.MaintenanceTaints {
		if !hasTaint(node, mt.Key, mt.Effect) {
			t.Errorf("node %s lacks taint %s:%s; taints: %v", node.Name, mt.Key, mt.Effect, node.Spec.Taints)
		}
	}
	if node.Labels[nodestate.ExcludeFromRemediationLabel] != "true" {
		t.Errorf("node %s lacks label %s=true", node.Name, nodestate.ExcludeFromRemediationLabel)
	}
}

// assertRestored checks the node is schedulable, without our taints and label.
func assertRestored(t *testing.T, node *corev1.Node) {
	t.Helper()
	if node.Spec.Unschedulable {
		t.Errorf("node %s is still cordoned", node.Name)
	}
	if hasTaint(node, nodestate.DrainTaintKey, corev1.TaintEffectNoSchedule) {
		t.Errorf("node %s still has the drain taint", node.Name)
	}
	if _, ok := node.Labels[nodestate.ExcludeFromRemediationLabel]; ok {
		t.Errorf("node %s still has label %s", node.Name, nodestate.ExcludeFromRemediationLabel)
	}
}

func getLease(c *testcluster.Cluster, node string) (*coordinationv1.Lease, error) {
	l := &coordinationv1.Lease{}
	err := c.Client.Get(bg(), client.ObjectKey{Namespace: lease.Namespace, Name: lease.Name(node)}, l)
	return l, err
}

func podNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return out
}

// stealLease makes "thief" the holder of the node's lease, freshly renewed
// for an hour, as another component taking the node would.
func stealLease(t *testing.T, c *testcluster.Cluster, node string) {
	t.Helper()
	// The operator renews the lease meanwhile; a theft that loses to a renewal
	// reads the lease again and tries once more.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := getLease(c, node)
		if err != nil {
			return err
		}
		l.Spec.HolderIdentity = ptr.To("thief")
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		l.Spec.LeaseDurationSeconds = ptr.To[int32](3600)
		return c.Client.Update(bg(), l)
	})
	if err != nil {
		t.Fatalf("take the lease of node %s: %v", node, err)
	}
}

// deploymentNode puts n pods of Deployment app (in ns) on a fresh node of a
// new pool, under a PDB when minAvailable or maxUnavailable is set, waits
// until they run, and adds a spare node to the pool for their replacements.
// It returns the node.
func deploymentNode(t *testing.T, c *testcluster.Cluster, ns, app string, n int32, minAvailable, maxUnavailable *intstr.IntOrString, opts ...testcluster.PodOption) string {
	t.Helper()
	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	c.CreateDeployment(t, ns, app, n, pool.Selector(), opts...)
	if minAvailable != nil || maxUnavailable != nil {
		c.CreatePDB(t, ns, app, minAvailable, maxUnavailable)
	}
	c.WaitRunningPods(t, ns, app, node, int(n))
	pool.AddNode(t, "")
	return node
}

// deadNode creates a Node that nobody runs (kwok does not manage it: no
// kwok annotation, and the package cluster has UnmanagedNodes), reports it
// NotReady, and deletes it at cleanup. Its pods stay as the API server has
// them: never running, and terminating for good once deleted.
func deadNode(t *testing.T, c *testcluster.Cluster) string {
	t.Helper()
	node := testcluster.UniqueName(t, "dead")
	dead := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{corev1.LabelHostname: node}}}
	if err := c.Client.Create(bg(), dead); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(bg(), dead) })
	// kube-controller-manager writes the new node too (taints, CIDRs).
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := getNode(t, c, node)
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotRunning", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		return c.Client.Status().Update(bg(), n)
	})
	if err != nil {
		t.Fatalf("make node %s NotReady: %v", node, err)
	}
	return node
}
