package controller

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
)

// plannedCondition is MaintenancePlanned as rollout ro writes it.
func plannedCondition(ro string) corev1.NodeCondition {
	at := metav1.Now().Rfc3339Copy()
	return corev1.NodeCondition{Type: corev1.NodeMaintenancePlanned, Status: corev1.ConditionTrue, Reason: nodestate.ReasonAdminRequested,
		Message: nodestate.PlannedBy(ro) + "will maintain the node (wave 1)", LastHeartbeatTime: at, LastTransitionTime: at}
}

// A rollout's maintenance takes its rollout's MaintenancePlanned off the
// node in the patch that first writes MaintenanceInProgress: the node goes
// from planned to in progress in one write. Another rollout's and an
// admin's MaintenancePlanned stay, and a NodeMaintenance of its own (no
// rollout owns it) leaves every MaintenancePlanned alone.
func TestMarkNodeTakesOverItsRolloutsMaintenancePlanned(t *testing.T) {
	for _, tc := range []struct {
		name    string
		owner   *metav1.OwnerReference
		planned corev1.NodeCondition
		removed bool
	}{
		{name: "its rollout's", owner: rolloutRef("ro"), planned: plannedCondition("ro"), removed: true},
		{name: "another rollout's", owner: rolloutRef("ro"), planned: plannedCondition("ro-2")},
		{name: "an admin's", owner: rolloutRef("ro"), planned: corev1.NodeCondition{Type: corev1.NodeMaintenancePlanned, Status: corev1.ConditionTrue, Reason: "ChangeBoard", Message: "CHG-1"}},
		{name: "no rollout", planned: plannedCondition("ro")},
		{name: "an owner of another kind with the rollout's name", owner: &metav1.OwnerReference{APIVersion: "apps/v1", Kind: nmv1alpha1.RolloutKind, Name: "ro", UID: "uid-x", Controller: ptr.To(true)}, planned: plannedCondition("ro")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := testObjects()
			objs[0].(*corev1.Node).Status.Conditions = append(objs[0].(*corev1.Node).Status.Conditions, tc.planned)
			if tc.owner != nil {
				objs[1].(*nmv1beta1.NodeMaintenance).OwnerReferences = []metav1.OwnerReference{*tc.owner}
			}
			var patches []corev1.Node
			e := newReconcileEnv(t, interceptor.Funcs{
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					err := c.SubResource(sub).Patch(ctx, obj, patch, opts...)
					if n, ok := obj.(*corev1.Node); ok && err == nil {
						patches = append(patches, *n.DeepCopy())
					}
					return err
				},
			}, objs...)
			e.reconcile()
			if len(patches) != 1 {
				t.Fatalf("%d patches of the node's conditions in the first pass, want 1", len(patches))
			}
			got := patches[0]
			if c := nodeCondition(&got, corev1.NodeMaintenanceInProgress); c == nil || c.Status != corev1.ConditionTrue {
				t.Fatalf("the first patch did not set MaintenanceInProgress: %+v", got.Status.Conditions)
			}
			planned := nodeCondition(&got, corev1.NodeMaintenancePlanned)
			switch {
			case tc.removed && planned != nil:
				t.Errorf("its rollout's MaintenancePlanned is still there after the patch that set MaintenanceInProgress: %+v", planned)
			case !tc.removed && (planned == nil || !equality.Semantic.DeepEqual(*planned, tc.planned)):
				t.Errorf("MaintenancePlanned changed to %+v, was %+v", planned, tc.planned)
			}
		})
	}
}

func rolloutRef(name string) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: nmv1alpha1.GroupVersion.String(), Kind: nmv1alpha1.RolloutKind, Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(true)}
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}
