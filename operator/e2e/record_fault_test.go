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
	nm := &nmv1beta1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{refuseRecordLabel: label}},
		Spec:       nmv1beta1.NodeMaintenanceSpec{NodeName: node, Reason: "fault test"},
	}
	if err := c.Client.Create(bg(), nm); err != nil {
		t.Fatalf("create NodeMaintenance %s: %v", name, err)
	}
	t.Cleanup(func() { deleteMaintenance(t, c, name) })
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

// refuseRecordLabel marks the objects refuseRecords applies to.
const refuseRecordLabel = "nodemaintenance.test/refuse-record"

// refuseRecords makes the API server refuse every NodeMaintenance labelled
// refuseRecordLabel=value that would carry a prior-state record: a
// ValidatingAdmissionPolicy, removed at cleanup. It returns once the policy
// is in force: a dry-run ConfigMap with the record annotation in ns, which
// the policy also covers, is refused.
func refuseRecords(t *testing.T, c *testcluster.Cluster, ns, value string) {
	t.Helper()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: value},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{refuseRecordLabel: value}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{
					rule(nmv1beta1.GroupVersion.Group, "nodemaintenances"),
					rule("", "configmaps"),
				},
			},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!has(object.metadata.annotations) || !('" + nodestate.PriorStateAnnotation + "' in object.metadata.annotations)",
				Message:    "fault test: the prior-state record is refused",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: value},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: value,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := c.Client.Create(bg(), obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, value, err)
		}
		t.Cleanup(func() { _ = c.Client.Delete(bg(), obj) })
	}
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: value,
		Labels: map[string]string{refuseRecordLabel: value}, Annotations: map[string]string{nodestate.PriorStateAnnotation: "{}"}}}
	testcluster.WaitFor(t, time.Minute, "the ValidatingAdmissionPolicy "+value+" to be in force", func(ctx context.Context) (bool, error) {
		err := c.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "prior-state record is refused"), nil
	})
}

func rule(group, resource string) admissionregistrationv1.NamedRuleWithOperations {
	return admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}},
	}}
}
