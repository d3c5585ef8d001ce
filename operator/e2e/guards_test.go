package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testoperator"
)

// assertUnchanged fails when node's state (stateOf: what a maintenance
// changes) differs from before: a guard that refuses must leave all of it.
func assertUnchanged(t *testing.T, c *testcluster.Cluster, node string, before nodeState) {
	t.Helper()
	if after := stateOf(t, c, node); !equality.Semantic.DeepEqual(before, after) {
		t.Errorf("node %s changed:\nbefore %+v\nafter  %+v", node, before, after)
	}
}

// patchNode changes a node with a merge patch, which the node controllers'
// own writes do not make conflict.
func patchNode(t *testing.T, c *testcluster.Cluster, name string, change func(*corev1.Node)) {
	t.Helper()
	node := getNode(t, c, name)
	orig := node.DeepCopy()
	change(node)
	if err := c.Client.Patch(bg(), node, client.MergeFrom(orig)); err != nil {
		t.Fatalf("patch node %s: %v", name, err)
	}
}

// assertNotStored fails when a NodeMaintenance of that name exists.
func assertNotStored(t *testing.T, c *testcluster.Cluster, name string) {
	t.Helper()
	err := c.Client.Get(bg(), client.ObjectKey{Name: name}, &nmv1beta1.NodeMaintenance{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("NodeMaintenance %s: want not found after the refusal, got %v", name, err)
	}
}

// A control-plane node is refused unless spec.drain.allowControlPlaneNode:
// the create fails with the reason, no NodeMaintenance is stored and the
// node is untouched. Allowed, it is maintained and restored as any node.
func TestControlPlaneNodeIsRefusedUnlessAllowed(t *testing.T) {
	c := testcluster.Get(t)
	pool := c.NewPool(t)
	cp := pool.AddNode(t, "")
	patchNode(t, c, cp.Name, func(n *corev1.Node) { n.Labels[validation.ControlPlaneLabel] = "" })
	before := settledStateOf(t, c, cp.Name) // kwok and the node controllers still write a new node

	name := testcluster.UniqueName(t, "cp")
	nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: cp.Name, Reason: "kernel"}}
	err := c.Client.Create(bg(), nm)
	want := `node "` + cp.Name + `" is a control-plane node (labelled node-role.kubernetes.io/control-plane): its maintenance is refused unless spec.drain.allowControlPlaneNode is true`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("create for control-plane node %s: want a refusal saying %q, got %v", cp.Name, want, err)
	}
	t.Logf("refused as it should: %v", err)
	assertNotStored(t, c, name)
	assertUnchanged(t, c, cp.Name, before)

	allowed := testcluster.UniqueName(t, "cp-allowed")
	nm = &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: allowed},
		Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: cp.Name, Drain: &nmv1beta1.DrainPolicy{AllowControlPlaneNode: true}}}
	if err := c.Client.Create(bg(), nm); err != nil {
		t.Fatalf("create with allowControlPlaneNode: %v", err)
	}
	t.Cleanup(func() { deleteMaintenance(t, c, allowed) })
	waitPhase(t, c, allowed, nmv1beta1.MaintenanceSucceeded)
	assertInMaintenance(t, getNode(t, c, cp.Name))
	deleteMaintenance(t, c, allowed)
	assertUnchanged(t, c, cp.Name, before)
}

// The last schedulable node of a cluster is refused unless
// spec.drain.allowLastSchedulableNode, by the webhook at create and, for a
// NodeMaintenance the webhook never saw, by the operator before it touches
// the node. The test has a cluster of its own: the package's cluster keeps a
// spare node so that the other tests may drain theirs.
func TestLastSchedulableNodeIsRefusedUnlessAllowed(t *testing.T) {
	testcluster.Get(t) // skips without TF_ACC
	ctx, cancel := context.WithTimeout(bg(), 5*time.Minute)
	c, err := testcluster.StartWith(ctx, "guards", testcluster.Options{UnmanagedNodes: true, NoSpareNode: true})
	if err == nil {
		err = c.InstallCRD(ctx)
	}
	cancel()
	if c != nil {
		t.Cleanup(c.Stop)
	}
	if err != nil {
		t.Fatalf("start a cluster of the test's own: %v", err)
	}
	last := c.AddNode(t, "last", nil)
	other := c.AddNode(t, "other", nil)

	// Created before any webhook is installed, while "other" takes pods;
	// then "other" is cordoned. The operator, started now, must not touch
	// "last".
	unseen := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "maintain-last-unseen"}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: "last"}}
	if err := c.Client.Create(bg(), unseen); err != nil {
		t.Fatalf("create %s without a webhook: %v", unseen.Name, err)
	}
	patchNode(t, c, other.Name, func(n *corev1.Node) { n.Spec.Unschedulable = true })
	before := settledStateOf(t, c, last.Name) // kwok and the node controllers still write a new node
	op, err := testoperator.Start(c, defaultOptions())
	if err != nil {
		t.Fatalf("start the operator on the test's cluster: %v", err)
	}
	t.Cleanup(op.Stop)

	got := waitPhase(t, c, unseen.Name, nmv1beta1.MaintenanceFailed)
	const wantLast = `node "last" is the last schedulable node of the cluster (no other node takes pods: other (cordoned)): its maintenance is refused unless spec.drain.allowLastSchedulableNode is true`
	if !strings.Contains(got.Status.LastError, wantLast) || !strings.Contains(got.Status.LastError, "Node last was not touched") {
		t.Errorf("lastError = %q, want it to say %q and that the node was not touched", got.Status.LastError, wantLast)
	}
	assertUnchanged(t, c, last.Name, before)
	if _, err := getLease(c, "last"); !apierrors.IsNotFound(err) {
		t.Errorf("the lease of node last: want none taken, got %v", err)
	}
	deleteMaintenance(t, c, unseen.Name)
	assertUnchanged(t, c, last.Name, before)

	// Through the webhook: refused at create, nothing stored.
	refused := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "maintain-last"}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: "last", Reason: "disk"}}
	err = c.Client.Create(bg(), refused)
	if err == nil || !strings.Contains(err.Error(), wantLast) {
		t.Fatalf("create for the last schedulable node: want a refusal saying %q, got %v", wantLast, err)
	}
	t.Logf("refused as it should: %v", err)
	assertNotStored(t, c, refused.Name)
	assertUnchanged(t, c, last.Name, before)

	// Allowed, it is maintained, and restored on delete.
	allowed := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "maintain-last-allowed"},
		Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: "last", Drain: &nmv1beta1.DrainPolicy{AllowLastSchedulableNode: true}}}
	if err := c.Client.Create(bg(), allowed); err != nil {
		t.Fatalf("create with allowLastSchedulableNode: %v", err)
	}
	waitPhase(t, c, allowed.Name, nmv1beta1.MaintenanceSucceeded)
	assertInMaintenance(t, getNode(t, c, "last"))
	deleteMaintenance(t, c, allowed.Name)
	assertUnchanged(t, c, last.Name, before)

	// Once "other" takes pods again, "last" is an ordinary node.
	patchNode(t, c, "other", func(n *corev1.Node) { n.Spec.Unschedulable = false })
	// The node lifecycle controller takes its unschedulable taint off a
	// moment after the uncordon.
	testcluster.WaitFor(t, time.Minute, "node other schedulable again", func(ctx context.Context) (bool, error) {
		n := &corev1.Node{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: "other"}, n); err != nil {
			return false, err
		}
		if why := validation.Unschedulable(n); why != "" {
			return false, fmt.Errorf("node other: %s", why)
		}
		return true, nil
	})
	ordinary := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "maintain-last-ordinary"}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: "last"}}
	if err := c.Client.Create(bg(), ordinary); err != nil {
		t.Fatalf("create once another node is schedulable: %v", err)
	}
	waitPhase(t, c, ordinary.Name, nmv1beta1.MaintenanceSucceeded)
	deleteMaintenance(t, c, ordinary.Name)
	assertUnchanged(t, c, last.Name, before)
}
