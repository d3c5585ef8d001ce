package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/manager"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testoperator"
)

// A maintenance that the medik8s node-maintenance-operator started and did
// not finish, built by hand while this operator is stopped (and its webhook
// out of the way): the node cordoned with both medik8s taints and the
// exclude-from-remediation label, one pod evicted and gone, one evicted and
// still terminating, the rest under a PDB still on the node; the lease held
// by node-maintenance for 3600 s; a NodeMaintenance with the finalizer,
// phase Running and medik8s's counts, and no prior-state record. This
// operator, started, carries it on to Succeeded without evicting any pod a
// second time (the API server's audit log counts the evictions), says that
// the prior state was not recorded, and on deletion restores the node the
// medik8s way, keeping the user's taint and label.
func TestTakeoverFromMedik8s(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	node := deploymentNode(t, c, ns, "api", 4, nil, ptr.To(intstr.FromInt32(1)), testcluster.WithTerminationDelay(2*time.Second))
	c.CreateBarePod(t, ns, "slow", node, testcluster.WithTerminationDelay(15*time.Second))
	c.WaitRunningPods(t, ns, "slow", node, 1)

	startOperator := stopOperatorAndWebhook(t, c)
	userTaint := corev1.Taint{Key: "example.com/user", Value: "x", Effect: corev1.TaintEffectPreferNoSchedule}
	cordonTheMedik8sWay(t, c, node, userTaint)
	api := podsOf(t, c, node, "api")
	evictByHand(t, c, ns, api[0].Name)
	waitPodGone(t, c, ns, api[0].Name)
	takeMedik8sLease(t, c, node)
	name := testcluster.UniqueName(t, "medik8s")
	createMedik8sMaintenance(t, c, name, node, []string{api[1].Name, api[2].Name, api[3].Name, "slow"})
	t.Cleanup(func() { startOperator(); deleteMaintenance(t, c, name) })
	evictByHand(t, c, ns, "slow") // still terminating when the operator starts
	began := time.Now()
	startOperator()

	nm := waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
	cond := meta.FindStatusCondition(nm.Status.Conditions, nmv1beta1.ConditionCordoned)
	if cond == nil || cond.Reason != nmv1beta1.ReasonAdopted || !strings.Contains(cond.Message, "prior node state was not recorded") {
		t.Errorf("Cordoned condition %+v; want reason %s saying that the prior node state was not recorded", cond, nmv1beta1.ReasonAdopted)
	}
	if prior, err := nodestate.Decode(nm.Annotations[nodestate.PriorStateAnnotation]); err != nil || !prior.Adopted || prior.Unschedulable {
		t.Errorf("record %+v (%v); want one that says adopted, not the cordoned node", prior, err)
	}
	if nm.Status.EvictionPods != 5 || nm.Status.TotalPods != 5 || nm.Status.DrainProgress != 100 {
		t.Errorf("evictionPods %d, totalPods %d, drainProgress %d; want 5, 5 (medik8s's count kept, the total counted back), 100",
			nm.Status.EvictionPods, nm.Status.TotalPods, nm.Status.DrainProgress)
	}
	if l, err := getLease(c, node); err != nil || ptr.Deref(l.Spec.HolderIdentity, "") != lease.Holder || l.Spec.RenewTime.Time.Before(began) {
		t.Errorf("lease %+v (%v); want it held by %s and renewed since the operator started", l.Spec, err, lease.Holder)
	}
	assertInMaintenance(t, getNode(t, c, node))

	deleteMaintenance(t, c, name)
	after := getNode(t, c, node)
	assertRestored(t, after)
	if hasTaint(after, corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule) {
		t.Errorf("node %s still has the unschedulable taint: %v", node, after.Spec.Taints)
	}
	if !hasTaint(after, userTaint.Key, userTaint.Effect) || after.Labels["example.com/team"] != "storage" {
		t.Errorf("the user's taint or label is gone: taints %v, labels %v", after.Spec.Taints, after.Labels)
	}
	if _, err := getLease(c, node); !apierrors.IsNotFound(err) {
		t.Errorf("lease of node %s: %v; want it released", node, err)
	}
	assertEachPodEvictedOnce(t, c, ns, append(podNames(api), ns+"/slow"))
}

// stopOperatorAndWebhook stops the package's operator and removes its
// webhook configuration, so that a test can build, as another operator
// would have, what this one would refuse or act on at once. The function
// it returns starts the operator again (it reinstalls the configuration);
// it runs at cleanup if the test did not call it.
func stopOperatorAndWebhook(t *testing.T, c *testcluster.Cluster) (start func()) {
	t.Helper()
	operator.Stop()
	started := false
	start = func() {
		if started {
			return
		}
		started = true
		var err error
		if operator, err = testoperator.Start(c, defaultOptions()); err != nil {
			t.Errorf("start the operator again: %v", err)
		}
	}
	t.Cleanup(start)
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: manager.DefaultLocalWebhookConfigName}}
	if err := c.Client.Delete(bg(), vwc); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("remove the webhook configuration %s: %v", vwc.Name, err)
	}
	return start
}

// cordonTheMedik8sWay puts the node in the state the medik8s operator
// leaves it in during a maintenance, beside a taint and a label of the user.
func cordonTheMedik8sWay(t *testing.T, c *testcluster.Cluster, node string, userTaint corev1.Taint) {
	t.Helper()
	n := getNode(t, c, node)
	orig := n.DeepCopy()
	n.Spec.Unschedulable = true
	for _, taint := range []corev1.Taint{userTaint, {Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule},
		{Key: nodestate.DrainTaintKey, Effect: corev1.TaintEffectNoSchedule}} {
		if !hasTaint(n, taint.Key, taint.Effect) {
			n.Spec.Taints = append(n.Spec.Taints, taint)
		}
	}
	n.Labels[nodestate.ExcludeFromRemediationLabel] = "true"
	n.Labels["example.com/team"] = "storage"
	if err := c.Client.Patch(bg(), n, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		t.Fatalf("cordon node %s the medik8s way: %v", node, err)
	}
}

func podsOf(t *testing.T, c *testcluster.Cluster, node, app string) []corev1.Pod {
	t.Helper()
	pods, err := c.PodsOnNode(bg(), node)
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods {
		if p.Labels["app"] == app {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no pod app=%s on node %s", app, node)
	}
	return out
}

// evictByHand evicts a pod as the other operator did, retrying while its
// PDB does not allow it yet.
func evictByHand(t *testing.T, c *testcluster.Cluster, ns, pod string) {
	t.Helper()
	testcluster.WaitFor(t, phaseTimeout, "the eviction of "+ns+"/"+pod, func(ctx context.Context) (bool, error) {
		err := c.Clientset.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod}})
		if apierrors.IsTooManyRequests(err) {
			return false, nil
		}
		return err == nil, err
	})
}

func waitPodGone(t *testing.T, c *testcluster.Cluster, ns, pod string) {
	t.Helper()
	testcluster.WaitFor(t, phaseTimeout, "pod "+ns+"/"+pod+" to be gone", func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod}, &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// takeMedik8sLease holds the node's lease as the medik8s operator does:
// holder node-maintenance, 3600 s, last renewed ten minutes ago.
func takeMedik8sLease(t *testing.T, c *testcluster.Cluster, node string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: lease.Namespace}}
	if err := c.Client.Create(bg(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	then := metav1.NewMicroTime(time.Now().Add(-10 * time.Minute))
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: lease.Namespace, Name: lease.Name(node)},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(lease.Holder), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &then, RenewTime: &then},
	}
	if err := c.Client.Create(bg(), l); err != nil {
		t.Fatalf("create the medik8s lease of node %s: %v", node, err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(bg(), l) })
}

// createMedik8sMaintenance creates a NodeMaintenance as the medik8s
// operator leaves it mid-drain: its finalizer, and a status written through
// the status subresource (Running, 5 pods to evict, pending the ones left).
func createMedik8sMaintenance(t *testing.T, c *testcluster.Cluster, name, node string, pending []string) {
	t.Helper()
	nm := &nmv1beta1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{nmv1beta1.NodeMaintenanceFinalizer}},
		Spec:       nmv1beta1.NodeMaintenanceSpec{NodeName: node, Reason: "RAM upgrade"},
	}
	if err := c.Client.Create(bg(), nm); err != nil {
		t.Fatalf("create NodeMaintenance %s: %v", name, err)
	}
	nm.Status = nmv1beta1.NodeMaintenanceStatus{
		Phase: nmv1beta1.MaintenanceRunning, EvictionPods: 5, DrainProgress: 20, PendingPods: pending,
		LastUpdate: metav1.Now(), LastError: "Cannot evict pod as it would violate the pod's disruption budget.",
	}
	if err := c.Client.Status().Update(bg(), nm); err != nil {
		t.Fatalf("write the status of NodeMaintenance %s: %v", name, err)
	}
}

// assertEachPodEvictedOnce reads the API server's audit log: every pod of
// pods had exactly one eviction accepted, whoever asked for it.
func assertEachPodEvictedOnce(t *testing.T, c *testcluster.Cluster, ns string, pods []string) {
	t.Helper()
	accepted, _, err := c.Evictions(bg(), ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if n := len(accepted[strings.TrimPrefix(p, ns+"/")]); n != 1 {
			t.Errorf("pod %s: %d evictions accepted, want 1", p, n)
		}
	}
	for p, times := range accepted {
		if len(times) > 1 {
			t.Errorf("pod %s/%s evicted %d times", ns, p, len(times))
		}
	}
}
