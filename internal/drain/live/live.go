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
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
)

// ErrNodeNotFound wraps the error of a preview for a node that does not exist.
var ErrNodeNotFound = errors.New("node not found")

// Bounds limit what a preview lists beyond the node's own pods, for callers
// on a hot path (the admission webhook): a cluster with more nodes or pods
// than that gets no capacity estimate, and costs two lists of one item
// instead of the lists of every node and pod. Zero is no bound.
type Bounds struct {
	Nodes, Pods int64
}

// Preview reads the node, the pods of the cluster, the nodes, the
// PodDisruptionBudgets and the ReplicaSets of the node's pods, and returns
// what a drain of the node under policy would do now. Bound it with ctx: it
// lists every pod of the cluster that is not finished.
func Preview(ctx context.Context, r client.Reader, nodeName string, policy *nmv1beta1.DrainPolicy, now time.Time) (drain.Preview, error) {
	return PreviewWithin(ctx, r, nodeName, policy, now, Bounds{})
}

// PreviewWithin is Preview with its cluster-wide lists bounded.
func PreviewWithin(ctx context.Context, r client.Reader, nodeName string, policy *nmv1beta1.DrainPolicy, now time.Time, b Bounds) (drain.Preview, error) {
	in, err := Read(ctx, r, nodeName, b)
	if err != nil {
		return drain.Preview{}, err
	}
	in.Policy, in.Now = policy, now
	return drain.NewPreview(in)
}

var notFinished = fields.AndSelectors(fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
	fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)))

// Read reads the preview's inputs for a node (without Policy and Now).
func Read(ctx context.Context, r client.Reader, nodeName string, b Bounds) (drain.PreviewInput, error) {
	var in drain.PreviewInput
	node := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return in, fmt.Errorf("node %q does not exist: %w", nodeName, ErrNodeNotFound)
		}
		return in, fmt.Errorf("read node %s: %w", nodeName, err)
	}
	in.Node = node
	// The pods bound to the node, finished ones included (the drain evicts
	// them); the same field selector as kubectl drain.
	onNode := &corev1.PodList{}
	if err := r.List(ctx, onNode, client.MatchingFields{"spec.nodeName": nodeName}); err != nil {
		return in, fmt.Errorf("list the pods of node %s: %w", nodeName, err)
	}
	in.Pods = onNode.Items
	var namespaces []string
	for i := range in.Pods {
		if !slices.Contains(namespaces, in.Pods[i].Namespace) {
			namespaces = append(namespaces, in.Pods[i].Namespace)
		}
	}
	slices.Sort(namespaces)

	// The nodes and the pods that still run elsewhere (finished pods hold
	// no room), for the capacity estimate, when the bounds allow: a list of
	// one item says how many there are.
	switch small, err := within(ctx, r, &corev1.NodeList{}, b.Nodes); {
	case err != nil:
		return in, fmt.Errorf("count nodes: %w", err)
	case !small:
		in.NoCapacity = fmt.Sprintf("the cluster has more than %d nodes", b.Nodes)
	}
	if in.NoCapacity == "" {
		switch small, err := within(ctx, r, &corev1.PodList{}, b.Pods); {
		case err != nil:
			return in, fmt.Errorf("count pods: %w", err)
		case !small:
			in.NoCapacity = fmt.Sprintf("the cluster has more than %d pods", b.Pods)
		}
	}
	running := &corev1.PodList{}
	if in.NoCapacity == "" {
		nodes := &corev1.NodeList{}
		if err := r.List(ctx, nodes); err != nil {
			return in, fmt.Errorf("list nodes: %w", err)
		}
		in.Nodes = nodes.Items
		if err := r.List(ctx, running, client.MatchingFieldsSelector{Selector: notFinished}); err != nil {
			return in, fmt.Errorf("list the pods of the other nodes: %w", err)
		}
	} else {
		// Whether a workload has ready replicas elsewhere needs only the
		// pods of its own namespace.
		running.Items = nil
		for _, ns := range namespaces {
			pods := &corev1.PodList{}
			if err := r.List(ctx, pods, client.InNamespace(ns), client.MatchingFieldsSelector{Selector: notFinished}); err != nil {
				return in, fmt.Errorf("list the pods of namespace %s: %w", ns, err)
			}
			running.Items = append(running.Items, pods.Items...)
		}
	}
	for i := range running.Items {
		if n := running.Items[i].Spec.NodeName; n != "" && n != nodeName {
			in.OtherPods = append(in.OtherPods, running.Items[i])
		}
	}
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

// within reports whether the API server holds at most max objects of the
// list's kind, from a list of one: the rest is its remainingItemCount. Zero
// is no bound.
func within(ctx context.Context, r client.Reader, list client.ObjectList, max int64) (bool, error) {
	if max == 0 {
		return true, nil
	}
	if err := r.List(ctx, list, client.Limit(1)); err != nil {
		return false, err
	}
	if list.GetContinue() == "" {
		return true, nil
	}
	rest := list.GetRemainingItemCount()
	return rest != nil && *rest+1 <= max, nil
}
