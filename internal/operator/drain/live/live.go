// Package live reads what a drain preview needs (drain.PreviewInput) from the
// API server and makes the preview. The operator's webhook and the provider
// both call it, with a reader that reads live (no cache): package drain stays
// free of controller-runtime.
package live

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/drain"
)

// ErrNodeNotFound wraps the error of a preview for a node that does not exist.
var ErrNodeNotFound = errors.New("node not found")

// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=list

// Preview reads the node, the pods of the cluster, the nodes, the
// PodDisruptionBudgets and the ReplicaSets of the node's pods, and returns
// what a drain of the node under policy would do now. Bound it with ctx: it
// lists every pod of the cluster that is not finished.
func Preview(ctx context.Context, r client.Reader, nodeName string, policy *nmv1beta1.DrainPolicy, now time.Time) (drain.Preview, error) {
	in, err := Read(ctx, r, nodeName)
	if err != nil {
		return drain.Preview{}, err
	}
	in.Policy, in.Now = policy, now
	return drain.NewPreview(in)
}

var notFinished = fields.AndSelectors(fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)))

// Read reads the preview's inputs for a node (without Policy and Now).
func Read(ctx context.Context, r client.Reader, nodeName string) (drain.PreviewInput, error) {
	var in drain.PreviewInput
	node := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return in, fmt.Errorf("node %q does not exist: %w", nodeName, ErrNodeNotFound)
		}
		return in, fmt.Errorf("read node %s: %w", nodeName, err)
	}
	in.Node = node
	nodes := &corev1.NodeList{}
	if err := r.List(ctx, nodes); err != nil {
		return in, fmt.Errorf("list nodes: %w", err)
	}
	in.Nodes = nodes.Items
	// The pods bound to the node, finished ones included (the drain evicts
	// them), and the others that still run somewhere (finished pods hold no
	// room); the same field selectors as kubectl drain and the scheduler.
	onNode := &corev1.PodList{}
	if err := r.List(ctx, onNode, client.MatchingFields{"spec.nodeName": nodeName}); err != nil {
		return in, fmt.Errorf("list the pods of node %s: %w", nodeName, err)
	}
	in.Pods = onNode.Items
	running := &corev1.PodList{}
	if err := r.List(ctx, running, client.MatchingFieldsSelector{Selector: notFinished}); err != nil {
		return in, fmt.Errorf("list the pods of the other nodes: %w", err)
	}
	for i := range running.Items {
		if n := running.Items[i].Spec.NodeName; n != "" && n != nodeName {
			in.OtherPods = append(in.OtherPods, running.Items[i])
		}
	}
	var namespaces []string
	for i := range in.Pods {
		if !slices.Contains(namespaces, in.Pods[i].Namespace) {
			namespaces = append(namespaces, in.Pods[i].Namespace)
		}
	}
	slices.Sort(namespaces)
	for _, ns := range namespaces {
		pdbs := &policyv1.PodDisruptionBudgetList{}
		if err := r.List(ctx, pdbs, client.InNamespace(ns)); err != nil {
			return in, fmt.Errorf("list the PodDisruptionBudgets of namespace %s: %w", ns, err)
		}
		in.Budgets = append(in.Budgets, pdbs.Items...)
		rss := &appsv1.ReplicaSetList{}
		if err := r.List(ctx, rss, client.InNamespace(ns)); err != nil {
			return in, fmt.Errorf("list the ReplicaSets of namespace %s: %w", ns, err)
		}
		in.ReplicaSets = append(in.ReplicaSets, rss.Items...)
	}
	return in, nil
}
