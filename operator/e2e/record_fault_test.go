package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// The window the operator's fixed cost opened: the lease is taken before the
// NodeMaintenance has its finalizer, which is written with the prior-state
// record, the one write before the cordon. Here that write never lands (the
// API server refuses it, as it would stay unmade by an operator that crashed
// right after the lease), and the user deletes the maintenance meanwhile.
// The object goes at once (no finalizer), the node is never touched, and the
// lease does not outlive it: it names the NodeMaintenance as its owner, and
// the garbage collector deletes it.
func TestDeletedBetweenLeaseAndRecord(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	node := deploymentNode(t, c, ns, "svc", 3, nil, nil)
	before := settledStateOf(t, c, node)
	label := testcluster.UniqueName(t, "refuse-record")
	refuseRecords(t, c, ns, label)

	name := testcluster.UniqueName(t, "window")
	nm := createUnderPolicy(t, c, name, node, label)
	testcluster.WaitFor(t, phaseTimeout, "the lease of node "+node+" owned by "+name, func(context.Context) (bool, error) {
		l, err := getLease(c, node)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && slices.ContainsFunc(l.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == nm.UID }), err
	})
	time.Sleep(2 * time.Second) // the operator retries the refused write meanwhile
	got := getMaintenance(t, c, name)
	if _, recorded := got.Annotations[nodestate.PriorStateAnnotation]; recorded || len(got.Finalizers) != 0 {
		t.Fatalf("NodeMaintenance %s has a record or finalizers %v although the API server refuses the record", name, got.Finalizers)
	}
	if getNode(t, c, node).Spec.Unschedulable {
		t.Fatalf("node %s was cordoned without a prior-state record", node)
	}

	if err := c.Client.Delete(bg(), got); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, time.Minute, "the lease of the deleted "+name+" to be gone", func(context.Context) (bool, error) {
		_, err := getLease(c, node)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	assertSameNodeState(t, node, before, stateOf(t, c, node))
	c.WaitRunningPods(t, ns, "svc", node, 3)
}

// createUnderPolicy creates NodeMaintenance name for node, labelled for the
// policy of refuseWrites(..., label, ...), and deletes it at cleanup.
func createUnderPolicy(t *testing.T, c *testcluster.Cluster, name, node, label string) *nmv1beta1.NodeMaintenance {
	t.Helper()
	nm := &nmv1beta1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{refuseRecordLabel: label}},
		Spec:       nmv1beta1.NodeMaintenanceSpec{NodeName: node, Reason: "fault test"},
	}
	if err := c.Client.Create(bg(), nm); err != nil {
		t.Fatalf("create NodeMaintenance %s: %v", name, err)
	}
	t.Cleanup(func() { deleteMaintenance(t, c, name) })
	return nm
}

// refuseRecordLabel marks the objects refuseWrites applies to.
const refuseRecordLabel = "nodemaintenance.test/refuse-record"

// refuseRecords makes the API server refuse every NodeMaintenance labelled
// refuseRecordLabel=value that would carry a prior-state record.
func refuseRecords(t *testing.T, c *testcluster.Cluster, ns, value string) {
	t.Helper()
	refuseWrites(t, c, ns, value, "nodemaintenances",
		"!has(object.metadata.annotations) || !('"+nodestate.PriorStateAnnotation+"' in object.metadata.annotations)",
		"fault test: the prior-state record is refused")
}

// refuseWrites makes the API server refuse the creates and updates of
// resource (of NodeMaintenances: "nodemaintenances", or a subresource such
// as "nodemaintenances/status") for objects labelled refuseRecordLabel=value
// that expression does not allow: a ValidatingAdmissionPolicy, removed at
// cleanup, or earlier by the function it returns. It returns once the policy
// is in force: a dry-run ConfigMap in ns, labelled and annotated with the
// record annotation, which the policy also covers, is refused.
func refuseWrites(t *testing.T, c *testcluster.Cluster, ns, value, resource, expression, message string) (lift func()) {
	t.Helper()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: value},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{refuseRecordLabel: value}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
					rule(nmv1beta1.GroupVersion.Group, resource),
					rule("", "configmaps"),
				},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: expression, Message: message}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: value},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: value,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	objs := []client.Object{binding, policy}
	lift = func() {
		for _, obj := range objs {
			if err := c.Client.Delete(bg(), obj); client.IgnoreNotFound(err) != nil {
				t.Errorf("delete %T %s: %v", obj, value, err)
			}
		}
	}
	for _, obj := range objs {
		if err := c.Client.Create(bg(), obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, value, err)
		}
	}
	t.Cleanup(lift)
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: value,
		Labels: map[string]string{refuseRecordLabel: value}, Annotations: map[string]string{nodestate.PriorStateAnnotation: "{}"}}}
	testcluster.WaitFor(t, time.Minute, "the ValidatingAdmissionPolicy "+value+" to be in force", func(ctx context.Context) (bool, error) {
		err := c.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), message), nil
	})
	return lift
}

func rule(group, resource string) admissionregistrationv1.NamedRuleWithOperations {
	return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}},
	}}
}

// The pass that cordons a node and evicts its first pods may never write its
// status: the API server refuses it here (as it is never made by an operator
// that dies first). The operator goes on evicting, one pod at a time as the
// budget allows, with every status write refused; once the writes are
// accepted again, the status counts every pod the drain started with, from
// the prior-state record, not the pods left.
func TestStatusRefusedAfterTheFirstEvictions(t *testing.T) {
	c := testcluster.Get(t)
	const pods = 6
	ns, node := slowDrain(t, c, "svc", pods, 2*time.Second)
	before := settledStateOf(t, c, node)
	label := testcluster.UniqueName(t, "refuse-status")
	lift := refuseWrites(t, c, ns, label, "nodemaintenances/status", "false", "fault test: the status is refused")

	name := testcluster.UniqueName(t, "no-status")
	createUnderPolicy(t, c, name, node, label)
	// Evicted pods count until they are gone: wait for two to be.
	testcluster.WaitFor(t, phaseTimeout, "two pods of "+ns+" evicted and gone from node "+node, func(ctx context.Context) (bool, error) {
		left := &corev1.PodList{}
		if err := c.Client.List(ctx, left, client.InNamespace(ns), client.MatchingFields{"spec.nodeName": node}); err != nil {
			return false, err
		}
		return len(left.Items) <= pods-2, nil
	})
	if got := getMaintenance(t, c, name); got.Status.Phase != "" || got.Status.TotalPods != 0 {
		t.Fatalf("NodeMaintenance %s has a status (%+v) although the API server refuses it", name, got.Status)
	}
	lift()
	finishSlowDrain(t, c, name, ns, node, pods, before, "refused status writes")
}
