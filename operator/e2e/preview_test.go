package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain/live"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// The preview of a node with a PodDisruptionBudget at 0, a single-replica
// Deployment, a bare pod, an emptyDir pod and a DaemonSet pod lists exactly
// what the drain then does: the pods it counts to evict are the preview's,
// those it evicts are gone, those the budget holds are its pending pods, and
// the DaemonSet pod stays. The create through a real client carries the
// webhook's warnings, which name the same risks.
func TestDrainPreviewMatchesTheDrain(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	c.CreateDeployment(t, ns, "db", 2, pool.Selector())
	c.CreatePDB(t, ns, "db", ptr.To(intstr.FromInt32(2)), nil)
	c.CreateDeployment(t, ns, "single", 1, pool.Selector())
	c.CreateDeployment(t, ns, "scratch", 1, pool.Selector(), testcluster.WithEmptyDir())
	c.CreateDaemonSet(t, ns, "agent", pool.Selector())
	c.CreateBarePod(t, ns, "bare", node)
	for app, n := range map[string]int{"db": 2, "single": 1, "scratch": 1, "agent": 1, "bare": 1} {
		c.WaitRunningPods(t, ns, app, node, n)
	}
	c.WaitNotReadyTaintGone(t, pool.AddNode(t, "")) // room for the replacements
	waitBudget(t, c, ns, "db", 2)

	p, err := live.Preview(bg(), c.Client, node, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("preview: %s", p.Summary())
	onNode := podsByApp(t, c, node)
	want := func(apps ...string) []types.NamespacedName {
		var out []types.NamespacedName
		for _, app := range apps {
			out = append(out, onNode[app]...)
		}
		slices.SortFunc(out, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
		return out
	}
	if !slices.Equal(p.Evict, want("bare", "db", "scratch", "single")) {
		t.Errorf("preview evicts %v, want %v", p.Evict, want("bare", "db", "scratch", "single"))
	}
	if len(p.Skip) != 1 || p.Skip[0].Pod != onNode["agent"][0] || p.Skip[0].Reason != drain.SkipDaemonSet {
		t.Errorf("preview leaves %v, want the DaemonSet pod %v", p.Skip, onNode["agent"])
	}
	if len(p.WaitFor) != 0 {
		t.Errorf("preview waits for %v, want none", p.WaitFor)
	}
	wantRisks := []string{
		"PDBAllowsNoDisruption PodDisruptionBudget " + ns + "/db",
		"AllReplicasOnNode Deployment " + ns + "/db", "AllReplicasOnNode Deployment " + ns + "/scratch", "AllReplicasOnNode Deployment " + ns + "/single",
		"NoController pod " + ns + "/bare",
		"EmptyDirData pod " + onNode["scratch"][0].String(),
	}
	var gotRisks []string
	for _, r := range p.Risks {
		gotRisks = append(gotRisks, fmt.Sprintf("%s %s", r.Kind, r.Subject))
	}
	if !slices.Equal(gotRisks, wantRisks) {
		t.Errorf("risks:\n%s\nwant:\n%s", strings.Join(gotRisks, "\n"), strings.Join(wantRisks, "\n"))
	}
	blockers := p.Blockers()
	if len(blockers) != 1 || !slices.Equal(blockers[0].Pods, want("db")) {
		t.Fatalf("blockers %+v, want the budget over %v", blockers, want("db"))
	}

	// The drain, created through a client that keeps the API server's warnings.
	warnings := &warningRecorder{}
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.WarningHandler = warnings
	warned, err := client.New(cfg, client.Options{Scheme: testcluster.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	name := "preview-" + node
	nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node}}
	if err := warned.Create(bg(), nm); err != nil {
		t.Fatalf("create NodeMaintenance %s: %v", name, err)
	}
	t.Cleanup(func() { deleteMaintenance(t, c, name) })
	got := warnings.all()
	t.Logf("webhook warnings:\n%s", strings.Join(got, "\n"))
	for _, phrase := range []string{
		"A drain of node " + node + " now would evict 5 pods",
		"PodDisruptionBudget " + ns + "/db allows no disruption now (2 healthy pods, 2 required): the drain will wait",
		"Deployment " + ns + "/single has every ready replica on node " + node + " (1: ",
		"pod " + ns + "/bare has no controller: it will be deleted and not recreated elsewhere",
		"pod " + onNode["scratch"][0].String() + " has emptyDir volumes (scratch)",
	} {
		if !slices.ContainsFunc(got, func(w string) bool { return strings.Contains(w, phrase) }) {
			t.Errorf("no webhook warning holds %q", phrase)
		}
	}

	// What the drain did: counted the preview's pods, evicted all but the
	// budget's, and waits for those.
	nm = waitMaintenance(t, c, name, "only the budget's pods pending", func(nm *nmv1beta1.NodeMaintenance) bool {
		return len(nm.Status.PendingPodsRefs) == 2 && nm.Status.EvictionPods > 0
	})
	if nm.Status.EvictionPods != len(p.Evict) || nm.Status.TotalPods != len(p.Evict)+len(p.Skip)+len(p.WaitFor) {
		t.Errorf("the drain counted %d pods to evict of %d, the preview %d of %d", nm.Status.EvictionPods, nm.Status.TotalPods,
			len(p.Evict), len(p.Evict)+len(p.Skip)+len(p.WaitFor))
	}
	var pending []types.NamespacedName
	for _, ref := range nm.Status.PendingPodsRefs {
		pending = append(pending, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name})
	}
	slices.SortFunc(pending, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	if !slices.Equal(pending, blockers[0].Pods) {
		t.Errorf("the drain waits for %v, the preview's blocker holds %v", pending, blockers[0].Pods)
	}
	testcluster.WaitFor(t, phaseTimeout, "the evicted pods to be gone from "+node, func(ctx context.Context) (bool, error) {
		pods, err := c.PodsOnNode(ctx, node)
		if err != nil {
			return false, err
		}
		var left []types.NamespacedName
		for _, pod := range pods {
			left = append(left, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
		}
		slices.SortFunc(left, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
		if w := want("agent", "db"); !slices.Equal(left, w) {
			return false, fmt.Errorf("pods on the node: %v, want %v (the DaemonSet pod and the budget's)", left, w)
		}
		return true, nil
	})
}

// The capacity estimate reports the evicted pods that fit nowhere when the
// other nodes of their pool are full, and nothing once a node with room
// joins.
func TestDrainPreviewCapacity(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	c.CreateDeployment(t, ns, "big", 2, pool.Selector(), testcluster.WithRequests("2", "1Gi"))
	c.WaitRunningPods(t, ns, "big", node, 2)
	waitReadyReplicas(t, c, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"}}, 2)
	small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	pool.AddNodeWithAllocatable(t, "", small) // room for one of the two

	p, err := live.Preview(bg(), c.Client, node, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(p.Risks, func(r drain.Risk) bool { return r.Kind == drain.RiskNoRoom })
	if len(p.Unplaced) != 1 || i < 0 {
		t.Fatalf("with room for one pod of two: unplaced %v, risks %+v", p.Unplaced, p.Risks)
	}
	for _, phrase := range []string{"1 pod evicted from node " + node + " would fit on no other node", "requests cpu 2, memory 1Gi",
		"the 1 node it may run on lack the free CPU, memory or pod slots", "first-fit estimate"} {
		if !strings.Contains(p.Risks[i].Message, phrase) {
			t.Errorf("the capacity risk does not say %q: %s", phrase, p.Risks[i].Message)
		}
	}
	if p.Risks[i].Blocker {
		t.Error("missing room is a blocker; the drain does not wait on it")
	}

	pool.AddNodeWithAllocatable(t, "", small)
	p, err = live.Preview(bg(), c.Client, node, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Unplaced) != 0 || slices.ContainsFunc(p.Risks, func(r drain.Risk) bool { return r.Kind == drain.RiskNoRoom }) {
		t.Errorf("with room for both pods: unplaced %v, risks %+v", p.Unplaced, p.Risks)
	}

	// The webhook's bounds: the API server's count of nodes or pods beyond
	// them leaves the estimate out, and says so; the rest of the preview
	// stays. The counts come out the same read consistently and from the
	// API server's watch cache (as the webhook reads them), where a list of
	// one item must still be one item and say how many are left.
	for _, tt := range []struct {
		bounds live.Bounds
		why    string
	}{
		{live.Bounds{Nodes: 2}, "the cluster has more than 2 nodes"},
		{live.Bounds{Nodes: 1000, Pods: 2}, "the cluster has more than 2 pods"},
		{live.Bounds{Nodes: 1000, Pods: 1}, "the cluster has more than 1 pods"},
		{live.Bounds{Nodes: 1000, Pods: 100000}, ""},
		{live.Bounds{Nodes: 2, FromWatchCache: true}, "the cluster has more than 2 nodes"},
		{live.Bounds{Nodes: 1000, Pods: 2, FromWatchCache: true}, "the cluster has more than 2 pods"},
		{live.Bounds{Nodes: 1000, Pods: 1, FromWatchCache: true}, "the cluster has more than 1 pods"},
		{live.Bounds{Nodes: 1000, Pods: 100000, FromWatchCache: true}, ""},
	} {
		p, err := live.PreviewWithin(bg(), c.Client, node, nil, time.Now(), tt.bounds)
		if err != nil {
			t.Fatal(err)
		}
		if p.NoCapacity != tt.why || len(p.Evict) != 2 {
			t.Errorf("bounds %+v: NoCapacity %q, want %q; evicted %v, want the 2 big pods", tt.bounds, p.NoCapacity, tt.why, p.Evict)
		}
		// Beyond the bounds, the Deployment is checked from its
		// ReplicaSet's status instead of its namespace's pods: both of its
		// ready replicas are on the node either way.
		outage := slices.ContainsFunc(p.Risks, func(r drain.Risk) bool {
			return r.Kind == drain.RiskOutage && r.Subject == "Deployment "+ns+"/big"
		})
		if !outage || len(p.NoOutageCheck) > 0 {
			t.Errorf("bounds %+v: outage of Deployment %s/big found %v, NoOutageCheck %v; want it found and nothing unchecked", tt.bounds, ns, outage, p.NoOutageCheck)
		}
	}
}

// In a cluster beyond the webhook's bounds the preview checks whether a
// workload has ready replicas elsewhere from its ReplicaSets' and
// StatefulSet's status, without listing its namespace's pods, and finds
// the same outages as the preview that lists every pod: a Deployment and a
// StatefulSet whose one replica is on the node, not a Deployment with a
// replica on another node.
func TestDrainPreviewOutageFromWorkloadStatus(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	pool := c.NewPool(t)
	room := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	node := pool.AddNodeWithAllocatable(t, "", room).Name
	other := pool.AddNodeWithAllocatable(t, "", room).Name
	here := map[string]string{"kubernetes.io/hostname": node}
	c.CreateDeployment(t, ns, "spread", 2, pool.Selector(), testcluster.WithRequests("3", "1Gi")) // one per node: 4 CPUs each
	c.CreateDeployment(t, ns, "solo", 1, here)
	c.CreateStatefulSet(t, ns, "db", 1, here)
	for app, n := range map[string]int{"spread": 1, "solo": 1, "db": 1} {
		c.WaitRunningPods(t, ns, app, node, n)
	}
	c.WaitRunningPods(t, ns, "spread", other, 1)
	waitReadyReplicas(t, c, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "spread"}}, 2)
	waitReadyReplicas(t, c, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "solo"}}, 1)
	waitReadyReplicas(t, c, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}}, 1)

	outages := func(p drain.Preview) (out []string) { // the spread pod's want of room is not the point here
		for _, r := range p.Risks {
			if r.Kind == drain.RiskOutage {
				out = append(out, fmt.Sprintf("%s %s", r.Kind, r.Subject))
			}
		}
		return out
	}
	all, err := live.Preview(bg(), c.Client, node, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"AllReplicasOnNode Deployment " + ns + "/solo", "AllReplicasOnNode StatefulSet " + ns + "/db"}
	if got := outages(all); !slices.Equal(got, want) {
		t.Fatalf("the preview that lists every pod: outages %q, want %q", got, want)
	}
	for _, bounds := range []live.Bounds{{Nodes: 1, Pods: 1}, {Nodes: 1, Pods: 1, FromWatchCache: true}} { // the namespace holds 4 pods
		p, err := live.PreviewWithin(bg(), c.Client, node, nil, time.Now(), bounds)
		if err != nil {
			t.Fatal(err)
		}
		if p.NoCapacity == "" || len(p.NoOutageCheck) > 0 {
			t.Errorf("bounds %+v: NoCapacity %q, NoOutageCheck %v; want the cluster beyond the bounds and every workload checked", bounds, p.NoCapacity, p.NoOutageCheck)
		}
		if got := outages(p); !slices.Equal(got, want) {
			t.Errorf("bounds %+v: outages %q, want %q as from the pods", bounds, got, want)
		}
	}
}

// waitReadyReplicas waits until the status of a Deployment or StatefulSet
// counts ready ready replicas.
func waitReadyReplicas(t *testing.T, c *testcluster.Cluster, obj client.Object, ready int32) {
	t.Helper()
	testcluster.WaitFor(t, time.Minute, fmt.Sprintf("%T %s/%s to count %d ready replicas", obj, obj.GetNamespace(), obj.GetName(), ready),
		func(ctx context.Context) (bool, error) {
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return false, err
			}
			switch o := obj.(type) {
			case *appsv1.Deployment:
				return o.Status.ReadyReplicas == ready, nil
			case *appsv1.StatefulSet:
				return o.Status.ReadyReplicas == ready, nil
			}
			return false, fmt.Errorf("%T has no ready replicas", obj)
		})
}

// podsByApp maps the app label of the pods on a node to their names.
func podsByApp(t *testing.T, c *testcluster.Cluster, node string) map[string][]types.NamespacedName {
	t.Helper()
	pods, err := c.PodsOnNode(bg(), node)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]types.NamespacedName{}
	for _, p := range pods {
		out[p.Labels["app"]] = append(out[p.Labels["app"]], types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
	}
	return out
}

// waitBudget waits until the disruption controller has counted healthy pods
// of the budget, so that its disruptionsAllowed is current.
func waitBudget(t *testing.T, c *testcluster.Cluster, ns, name string, healthy int32) {
	t.Helper()
	testcluster.WaitFor(t, time.Minute, "PodDisruptionBudget "+ns+"/"+name+" to count its pods", func(ctx context.Context) (bool, error) {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pdb); err != nil {
			return false, err
		}
		return pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.CurrentHealthy == healthy, nil
	})
}

// warningRecorder keeps the API server's warnings (a rest.WarningHandler).
type warningRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warningRecorder) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}
