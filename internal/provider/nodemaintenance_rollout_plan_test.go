package provider

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

// A rollout's plan previews its nodes for their blockers without listing
// every pod of a cluster beyond the preview's bounds (live.HotPath): each
// preview reads the node's pods and their namespaces, and still finds a
// budget that allows no disruption.
func TestRolloutPlanBlockersDoNotListTheCluster(t *testing.T) {
	var objs []client.Object
	for i := range 52 { // beyond the bound of 50 nodes
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node%02d", i)},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("db-%02d", i), Labels: map[string]string{"app": "db"}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node%02d", i)}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	}
	objs = append(objs, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0, CurrentHealthy: 52, DesiredHealthy: 52}})
	var everyPod []string
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			o := client.ListOptions{}
			o.ApplyOptions(opts)
			if _, ok := list.(*corev1.PodList); ok && o.Limit == 0 && (o.FieldSelector == nil || !strings.Contains(o.FieldSelector.String(), "spec.nodeName")) {
				everyPod = append(everyPod, fmt.Sprintf("namespace %q, fields %v", o.Namespace, o.FieldSelector))
				if o.FieldSelector != nil { // the fake client knows no "status.phase!=": every pod here runs
					opts = []client.ListOption{client.InNamespace(o.Namespace)}
				}
			}
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			// The fake client ignores limits: answer a count as the API
			// server does, with one item and how many are left.
			items, err := apimeta.ExtractList(list)
			if err != nil || o.Limit == 0 || int64(len(items)) <= o.Limit {
				return err
			}
			list.SetContinue("more")
			list.SetRemainingItemCount(ptr.To(int64(len(items)) - o.Limit))
			return apimeta.SetList(list, items[:o.Limit])
		}}).Build()

	var diags diag.Diagnostics
	drainBlockers(context.Background(), &clients{kube: kube, cluster: "test"}, []string{"node00", "node01"}, nil, &diags)
	if len(everyPod) > 0 {
		t.Errorf("the plan listed every pod of the cluster (%s); want only each node's pods", strings.Join(everyPod, ", "))
	}
	var budgets int
	for _, w := range diags.Warnings() {
		if strings.Contains(w.Detail(), "PodDisruptionBudget shop/db allows no disruption now") {
			budgets++
		}
	}
	if diags.HasError() || budgets != 2 {
		t.Errorf("diagnostics %v: want the budget's blocker once per node, 2", diags)
	}
}

// The plan refuses a node_selector that matches more nodes than one
// rollout's status can keep rows for, on node_selector, as the webhook
// would at apply.
func TestRolloutPlanRefusesASetTooLargeForOneRollout(t *testing.T) {
	var objs []client.Object
	for i := range 6000 {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ip-10-12-%d-%d.eu-central-1.compute.internal", i/256, i%256),
			Labels: map[string]string{"pool": "big"}}})
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	var diags diag.Diagnostics
	spec := nmv1alpha1.NodeMaintenanceRolloutSpec{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "big"}}}
	nodes, err := resolveNodes(context.Background(), kube, spec, &diags)
	if err != nil || nodes != nil {
		t.Fatalf("resolveNodes: %d nodes, %v; want none and an error diagnostic", len(nodes), err)
	}
	if len(diags) != 1 || diags[0].Summary() != "Node Set Too Large for One Rollout" ||
		!strings.Contains(diags[0].Detail(), `the set of node_selector "pool=big" has 6000 nodes`) || !strings.Contains(diags[0].Detail(), "split the set") {
		t.Errorf("diagnostics %v, want one error saying the set of 6000 nodes is too large and to split it", diags)
	}
}

// A long node_names is checked against one list of the nodes, not a read
// per name, and still names the missing ones in order.
func TestRolloutPlanChecksManyNodeNamesWithAList(t *testing.T) {
	var objs []client.Object
	var names []string
	for i := range 300 {
		name := fmt.Sprintf("node%03d", i)
		names = append(names, name)
		if i != 7 && i != 250 {
			objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	}
	var gets, lists int
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets++
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lists++
			return c.List(ctx, list, opts...)
		},
	}).Build()
	var diags diag.Diagnostics
	nodes, err := resolveNodes(context.Background(), kube, nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: names}, &diags)
	if err != nil || nodes != nil {
		t.Fatalf("resolveNodes: %d nodes, %v; want none and an error diagnostic", len(nodes), err)
	}
	if len(diags) != 1 || !strings.Contains(diags[0].Detail(), "node007, node250.") {
		t.Errorf("diagnostics %v, want node007 and node250 named missing", diags)
	}
	if gets != 0 || lists != 1 {
		t.Errorf("%d gets and %d lists for 300 names, want one list", gets, lists)
	}
}
