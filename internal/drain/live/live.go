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

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
)

// ErrNodeNotFound wraps the error of a preview for a node that does not exist.
var ErrNodeNotFound = errors.New("node not found")

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
	node := &corev1.Node{}
	if err := r.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return drain.PreviewInput{}, fmt.Errorf("node %q does not exist: %w", nodeName, ErrNodeNotFound)
		}
		return drain.PreviewInput{}, fmt.Errorf("read node %s: %w", nodeName, err)
	}
	return ReadFor(ctx, r, Known{Node: node}, b)
}

// Known is what a caller of ReadFor has read already.
type Known struct {
	// Node is the node to drain.
	Node *corev1.Node
	// Nodes, when not nil, are the nodes the caller listed (the webhook's
	// guard): every node of the cluster, or more than the bounds' Nodes
	// of them, which says the cluster is beyond the bounds. They are not
	// read again.
	Nodes []corev1.Node
}

// ReadFor is Read for a node, and maybe the nodes, the caller has read
// already (the webhook). The reads are made in two rounds of concurrent
// requests: first the node's pods and the cluster's size (sizeUp), then what
// those decide (readAround: the namespaces' budgets, ReplicaSets and pods,
// and the nodes and pods of a small cluster), so that a preview costs two
// round trips to the API server, not one per read.
func ReadFor(ctx context.Context, r client.Reader, known Known, b Bounds) (drain.PreviewInput, error) {
	rd := reader{r: r, b: b}
	in, err := rd.sizeUp(ctx, known)
	if err != nil {
		return in, err
	}
	if err := rd.readAround(ctx, &in, known); err != nil {
		return in, err
	}
	return in, nil
}

// sizeUp is the first round: the pods bound to the node, and whether the
// cluster's nodes and pods are within the bounds (NoCapacity says why not).
func (rd reader) sizeUp(ctx context.Context, known Known) (drain.PreviewInput, error) {
	node := known.Node
	in := drain.PreviewInput{Node: node}
	onNode := &corev1.PodList{}
	var smallNodes, smallPods bool
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		// The pods bound to the node, finished ones included (the drain
		// evicts them); the same field selector as kubectl drain.
		if err := rd.list(gctx, onNode, client.MatchingFields{"spec.nodeName": node.Name}); err != nil {
			return fmt.Errorf("list the pods of node %s: %w", node.Name, err)
		}
		return nil
	})
	// A list of one item says how many nodes and pods there are: the
	// capacity estimate lists them all only when the bounds allow.
	if known.Nodes != nil {
		smallNodes = rd.b.Nodes == 0 || int64(len(known.Nodes)) <= rd.b.Nodes
	} else {
		g.Go(func() (err error) {
			if smallNodes, err = rd.within(gctx, &corev1.NodeList{}, rd.b.Nodes); err != nil {
				return fmt.Errorf("count nodes: %w", err)
			}
			return nil
		})
	}
	if known.Nodes == nil || smallNodes { // too many nodes known: no need to count the pods
		g.Go(func() (err error) {
			if smallPods, err = rd.within(gctx, &corev1.PodList{}, rd.b.Pods); err != nil {
				return fmt.Errorf("count pods: %w", err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return in, err
	}
	in.Pods = onNode.Items
	switch {
	case !smallNodes:
		in.NoCapacity = fmt.Sprintf("the cluster has more than %d nodes", rd.b.Nodes)
	case !smallPods:
		in.NoCapacity = fmt.Sprintf("the cluster has more than %d pods", rd.b.Pods)
	}
	return in, nil
}

// around is what the second round reads, per namespace of the node's pods
// and for the cluster.
type around struct {
	namespaces   []string
	budgets      [][]policyv1.PodDisruptionBudget
	replicaSets  [][]appsv1.ReplicaSet
	nsPods       [][]corev1.Pod
	unchecked    []string
	statefulSets []*appsv1.StatefulSet
	nodes        corev1.NodeList
	running      corev1.PodList
}

// readAround is the second round: the budgets and ReplicaSets of the pods'
// namespaces, and either every node and running pod (for the capacity
// estimate) or, in a cluster beyond the bounds, what the outage check needs
// (drain.OutageReadsOf): the StatefulSets of the pods to evict, whose
// status, like their ReplicaSets', counts their ready replicas, and the pods
// of each namespace where a pod's controller is of another kind, if the
// namespace is within the pod bound. The cost of a preview in a large
// cluster then grows with the node's workloads, not with its namespaces'
// pods.
func (rd reader) readAround(ctx context.Context, in *drain.PreviewInput, known Known) error {
	a := &around{}
	for i := range in.Pods {
		if !slices.Contains(a.namespaces, in.Pods[i].Namespace) {
			a.namespaces = append(a.namespaces, in.Pods[i].Namespace)
		}
	}
	slices.Sort(a.namespaces)
	n := len(a.namespaces)
	a.budgets, a.replicaSets = make([][]policyv1.PodDisruptionBudget, n), make([][]appsv1.ReplicaSet, n)
	a.nsPods, a.unchecked = make([][]corev1.Pod, n), make([]string, n)
	g, gctx := errgroup.WithContext(ctx)
	rd.readNamespaces(gctx, g, a)
	if in.NoCapacity == "" {
		rd.readCluster(gctx, g, a, known)
	} else {
		reads := drain.OutageReadsOf(in.Node, in.Pods)
		in.ByStatus = reads.StatusOf
		rd.readNamespacePods(gctx, g, a, reads.PodsOf)
		rd.readStatefulSets(gctx, g, a, reads.StatefulSets)
	}
	if err := g.Wait(); err != nil {
		return err
	}
	in.Nodes = a.nodes.Items
	for _, sts := range a.statefulSets {
		if sts != nil {
			in.StatefulSets = append(in.StatefulSets, *sts)
		}
	}
	for i, ns := range a.namespaces {
		in.Budgets = append(in.Budgets, a.budgets[i]...)
		in.ReplicaSets = append(in.ReplicaSets, a.replicaSets[i]...)
		a.running.Items = append(a.running.Items, a.nsPods[i]...)
		if a.unchecked[i] != "" {
			if in.NoOutageCheck == nil {
				in.NoOutageCheck = map[string]string{}
			}
			in.NoOutageCheck[ns] = a.unchecked[i]
		}
	}
	for i := range a.running.Items {
		if n := a.running.Items[i].Spec.NodeName; n != "" && n != in.Node.Name {
			in.OtherPods = append(in.OtherPods, a.running.Items[i])
		}
	}
	return nil
}

// readNamespaces lists the budgets and ReplicaSets of each namespace.
func (rd reader) readNamespaces(ctx context.Context, g *errgroup.Group, a *around) {
	for i, ns := range a.namespaces {
		g.Go(func() error {
			pdbs := &policyv1.PodDisruptionBudgetList{}
			if err := rd.list(ctx, pdbs, client.InNamespace(ns)); err != nil {
				return fmt.Errorf("list the PodDisruptionBudgets of namespace %s: %w", ns, err)
			}
			a.budgets[i] = pdbs.Items
			return nil
		})
		g.Go(func() error {
			rss := &appsv1.ReplicaSetList{}
			if err := rd.list(ctx, rss, client.InNamespace(ns)); err != nil {
				return fmt.Errorf("list the ReplicaSets of namespace %s: %w", ns, err)
			}
			a.replicaSets[i] = rss.Items
			return nil
		})
	}
}

// readCluster lists the nodes (unless known) and the pods that still run
// anywhere (finished pods hold no room), for the capacity estimate.
func (rd reader) readCluster(ctx context.Context, g *errgroup.Group, a *around, known Known) {
	a.nodes.Items = known.Nodes
	g.Go(func() error {
		if known.Nodes != nil {
			return nil
		}
		if err := rd.list(ctx, &a.nodes); err != nil {
			return fmt.Errorf("list nodes: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		if err := rd.list(ctx, &a.running, client.MatchingFieldsSelector{Selector: notFinished}); err != nil {
			return fmt.Errorf("list the pods of the other nodes: %w", err)
		}
		return nil
	})
}

// readNamespacePods lists the running pods of each namespace named in only
// that holds at most the pod bound; a larger one is named in unchecked.
func (rd reader) readNamespacePods(ctx context.Context, g *errgroup.Group, a *around, only []string) {
	for i, ns := range a.namespaces {
		if !slices.Contains(only, ns) {
			continue
		}
		g.Go(func() error {
			small, err := rd.within(ctx, &corev1.PodList{}, rd.b.Pods, client.InNamespace(ns))
			if err != nil {
				return fmt.Errorf("count the pods of namespace %s: %w", ns, err)
			}
			if !small {
				a.unchecked[i] = fmt.Sprintf("namespace %s has more than %d pods", ns, rd.b.Pods)
				return nil
			}
			pods := &corev1.PodList{}
			if err := rd.list(ctx, pods, client.InNamespace(ns), client.MatchingFieldsSelector{Selector: notFinished}); err != nil {
				return fmt.Errorf("list the pods of namespace %s: %w", ns, err)
			}
			a.nsPods[i] = pods.Items
			return nil
		})
	}
}

// readStatefulSets reads the StatefulSets named (from the watch cache when
// the bounds say so). One that is gone is left out: the preview then says
// its workload was not checked.
func (rd reader) readStatefulSets(ctx context.Context, g *errgroup.Group, a *around, names []types.NamespacedName) {
	a.statefulSets = make([]*appsv1.StatefulSet, len(names))
	for i, key := range names {
		g.Go(func() error {
			sts := &appsv1.StatefulSet{}
			switch err := rd.get(ctx, key, sts); {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return fmt.Errorf("read StatefulSet %s: %w", key, err)
			}
			a.statefulSets[i] = sts
			return nil
		})
	}
}
