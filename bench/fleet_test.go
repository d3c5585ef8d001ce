package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// targetsPerSpare is how many nodes of a fleet share one spare node, where
// their evicted pods go: 10 nodes of 10 pods fill 100 of a fake node's 110.
const targetsPerSpare = 10

// fleet is a large set of prepared nodes (P7): count nodes that each run
// pods pods of a Deployment of their own, and a spare node for every
// targetsPerSpare of them. Each Deployment's pods may run only on their
// node or its spare (required node affinity on the hostname label, which FakeNode sets to the name), and the spares are
// added once the pods run, so every pod starts on its node and an evicted
// one can only go to the spare: never to another node of the set, drained
// or not. No pod tolerates the cordon.
//
// It is prepareNodes for hundreds of nodes: the creates go out in parallel
// through the bulk client and each wait is one list per poll, instead of a
// node, a Deployment and a wait at a time. Nothing of it is timed.
type fleet struct {
	t             testing.TB
	cs            kubernetes.Interface
	ns            string
	pool          *testcluster.Pool
	nodes, spares []string
}

// prepareFleet makes a fleet in a namespace of its own and returns its
// nodes' names, in order. At cleanup the namespace goes first, while its
// pods' nodes still exist to end them, then the nodes.
func prepareFleet(t testing.TB, c *testcluster.Cluster, cs kubernetes.Interface, count, pods int) []string {
	t.Helper()
	start := time.Now()
	f := &fleet{t: t, cs: cs, ns: testcluster.UniqueName(t, "ns"), pool: c.NewPool(t)}
	ns := f.ns
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s for the fleet: %v", ns, err)
	}
	for i := range count {
		f.nodes = append(f.nodes, fmt.Sprintf("%s-n%04d", f.pool.Value, i))
	}
	for i := 0; i < count; i += targetsPerSpare {
		f.spares = append(f.spares, fmt.Sprintf("%s-s%03d", f.pool.Value, i/targetsPerSpare))
	}
	t.Cleanup(f.remove)
	f.addNodes(f.nodes)
	parallel(t, 32, count, func(i int) error {
		_, err := cs.AppsV1().Deployments(ns).Create(context.Background(), f.deployment(i, pods), metav1.CreateOptions{})
		return err
	})
	f.waitPods(pods)
	f.addNodes(f.spares)
	t.Logf("fleet of %d nodes × %d pods and %d spares prepared in %s", count, pods, len(f.spares), time.Since(start).Round(time.Millisecond))
	return f.nodes
}

// addNodes creates the nodes at once and waits until every one is Ready
// and without the not-ready taint (until then nothing lands there).
func (f *fleet) addNodes(names []string) {
	f.t.Helper()
	addFakeNodes(f.t, f.cs, names, f.pool.Selector(), testcluster.PoolLabel+"="+f.pool.Value, time.Second, 5*time.Minute, takesNewPods)
}

// takesNewPods reports a node Ready and without the not-ready taint.
func takesNewPods(n *corev1.Node) bool {
	for _, taint := range n.Spec.Taints {
		if taint.Key == corev1.TaintNodeNotReady {
			return false
		}
	}
	return nodeReady(n)
}

// remove deletes the fleet's namespace, waits until it is gone (so that
// the next run does not share the API server with thousands of
// terminating pods), then deletes its nodes.
func (f *fleet) remove() {
	ctx := context.Background()
	start := time.Now()
	_ = f.cs.CoreV1().Namespaces().Delete(ctx, f.ns, metav1.DeleteOptions{})
	pollSlow(f.t, 10*time.Minute, "namespace "+f.ns+" gone", func(ctx context.Context) (bool, error) {
		_, err := f.cs.CoreV1().Namespaces().Get(ctx, f.ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	_ = f.cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: testcluster.PoolLabel + "=" + f.pool.Value})
	f.t.Logf("fleet %s removed in %s", f.pool.Value, time.Since(start).Round(time.Millisecond))
}

// pollSlow is pollFor at one poll a second: for conditions that list
// thousands of objects.
func pollSlow(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	pollFor(t, timeout, time.Second, what, cond)
}

// deployment is the Deployment of node i: pods pods, allowed on node i and
// its spare only.
func (f *fleet) deployment(i, pods int) *appsv1.Deployment {
	name := fmt.Sprintf("app-%04d", i)
	labels := map[string]string{"app": name}
	onlyThere := corev1.NodeSelectorRequirement{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn,
		Values: []string{f.nodes[i], f.spares[i/targetsPerSpare]}}
	spec := corev1.PodSpec{
		NodeSelector:                  f.pool.Selector(),
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		Containers:                    []corev1.Container{{Name: "app", Image: testcluster.PauseImage}},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{onlyThere}}},
			}}},
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(pods)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

// waitPods waits until every node of the fleet runs pods pods (none
// terminating), with one list of the namespace per poll.
func (f *fleet) waitPods(pods int) {
	f.t.Helper()
	what := fmt.Sprintf("%d running pods on each of %d nodes", pods, len(f.nodes))
	pollSlow(f.t, 10*time.Minute, what, func(ctx context.Context) (bool, error) {
		list, err := f.cs.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		running := map[string]int{}
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running[p.Spec.NodeName]++
			}
		}
		for _, n := range f.nodes {
			if running[n] != pods {
				return false, nil
			}
		}
		return true, nil
	})
}
