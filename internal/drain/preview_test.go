package drain

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
)

const drained = "n0"

func previewNode(name, cpu, mem, pods string, opts ...func(*corev1.Node)) corev1.Node {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
		corev1.ResourcePods: resource.MustParse(pods)}
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "a"}},
		Status: corev1.NodeStatus{Allocatable: alloc, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	for _, o := range opts {
		o(&n)
	}
	return n
}

// controlled makes the pod a replica of a named controller.
func controlled(kind, name string) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, APIVersion: "apps/v1", Name: name, Controller: ptrTrue()}}
	}
}
func labelled(k, v string) podOpt {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[k] = v
	}
}
func isReady(p *corev1.Pod) {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
}
func on(node string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = node } }
func requests(cpu, mem string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}
	}
}
func selects(k, v string) podOpt {
	return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{k: v} }
}

func budget(name string, allowed int32, matchApp string) policyv1.PodDisruptionBudget {
	return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": matchApp}}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed, CurrentHealthy: 2, DesiredHealthy: 2}}
}

func nn(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }

func kinds(p Preview) []string {
	var out []string
	for _, r := range p.Risks {
		out = append(out, fmt.Sprintf("%s %s", r.Kind, r.Subject))
	}
	return out
}

func mustPreview(t *testing.T, in PreviewInput) Preview {
	t.Helper()
	if in.Node == nil {
		n := previewNode(drained, "4", "8Gi", "110")
		in.Node = &n
	}
	if in.Nodes == nil {
		// Another node takes pods: the node is not the last one.
		in.Nodes = []corev1.Node{previewNode("spare", "1", "1Gi", "110")}
	}
	if in.Now.IsZero() {
		in.Now = time.Unix(5000, 0)
	}
	p, err := NewPreview(in)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The preview puts each pod where the drain's plan does: evicted, staying
// (with the plan's reason) or waited for.
func TestPreviewClassifiesLikeThePlan(t *testing.T) {
	pods := []corev1.Pod{
		pod("web", controlled("ReplicaSet", "web-1"), labelled("app", "web")),
		pod("ds", ownedBy("DaemonSet", "apps/v1")),
		pod("static", mirror),
		pod("kept", controlled("ReplicaSet", "kept-1"), labelled(nmv1beta1.DrainLabel, nmv1beta1.DrainLabelSkip)),
		pod("job", controlled("Job", "job"), labelled(nmv1beta1.DrainLabel, nmv1beta1.DrainLabelWaitCompleted)),
		pod("leaving", controlled("ReplicaSet", "web-1"), terminating),
		pod("batch", controlled("ReplicaSet", "batch-1"), labelled("tier", "batch")),
	}
	p := mustPreview(t, PreviewInput{Pods: pods, Policy: &nmv1beta1.DrainPolicy{
		PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"x"}}}}}})
	if want := []types.NamespacedName{nn("batch"), nn("web")}; !slices.Equal(p.Evict, want) {
		t.Errorf("Evict = %v, want %v", p.Evict, want)
	}
	wantSkip := []PodReason{{nn("ds"), SkipDaemonSet}, {nn("kept"), SkipDrainLabel}, {nn("static"), SkipMirror}}
	if !slices.Equal(p.Skip, wantSkip) {
		t.Errorf("Skip = %v, want %v", p.Skip, wantSkip)
	}
	wantWait := []PodReason{{nn("job"), WaitCompleted}, {nn("leaving"), WaitTerminating}}
	if !slices.Equal(p.WaitFor, wantWait) {
		t.Errorf("WaitFor = %v, want %v", p.WaitFor, wantWait)
	}

	selective := mustPreview(t, PreviewInput{Pods: pods, Policy: &nmv1beta1.DrainPolicy{
		PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "batch"}}}})
	if want := []types.NamespacedName{nn("batch")}; !slices.Equal(selective.Evict, want) {
		t.Errorf("with podSelector tier=batch, Evict = %v, want %v", selective.Evict, want)
	}
	if i := slices.IndexFunc(selective.Skip, func(r PodReason) bool { return r.Pod == nn("web") }); i < 0 || selective.Skip[i].Reason != SkipNotSelected {
		t.Errorf("with podSelector tier=batch, web should stay as not selected: %v", selective.Skip)
	}

	if _, err := NewPreview(PreviewInput{Node: &corev1.Node{}, Policy: &nmv1beta1.DrainPolicy{PodSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}}}); err == nil {
		t.Error("an invalid podSelector is not an error")
	}
}

func TestPreviewRisks(t *testing.T) {
	rsOf := func(rs, deployment string) appsv1.ReplicaSet {
		return appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: rs, OwnerReferences: []metav1.OwnerReference{
			{Kind: "Deployment", APIVersion: "apps/v1", Name: deployment, Controller: ptrTrue()}}}}
	}
	big := previewNode("n1", "8", "16Gi", "110")
	tests := []struct {
		name   string
		in     PreviewInput
		want   []string // kind and subject, in order
		detail string   // a phrase one message must hold
	}{
		{name: "nothing to say",
			in: PreviewInput{Pods: []corev1.Pod{pod("web-a", controlled("ReplicaSet", "web-1"), isReady)},
				OtherPods: []corev1.Pod{pod("web-b", controlled("ReplicaSet", "web-1"), isReady, on("n1"))}, Nodes: []corev1.Node{big}}},
		{name: "budget at zero blocks, one that allows does not",
			in: PreviewInput{Pods: []corev1.Pod{pod("db-0", controlled("StatefulSet", "db"), labelled("app", "db"), isReady),
				pod("web-a", controlled("ReplicaSet", "web-1"), labelled("app", "web"), isReady)},
				OtherPods: []corev1.Pod{pod("db-1", controlled("StatefulSet", "db"), isReady, on("n1")), pod("web-b", controlled("ReplicaSet", "web-1"), isReady, on("n1"))},
				Budgets:   []policyv1.PodDisruptionBudget{budget("db", 0, "db"), budget("web", 1, "web")}, Nodes: []corev1.Node{big}},
			want: []string{"PDBAllowsNoDisruption PodDisruptionBudget ns/db"}, detail: "allows no disruption now (2 healthy pods, 2 required): the drain will wait to evict ns/db-0 until it does"},
		{name: "a finished pod is not held by a budget",
			in: PreviewInput{Pods: []corev1.Pod{pod("done", controlled("Job", "j"), labelled("app", "db"), phase(corev1.PodSucceeded))},
				Budgets: []policyv1.PodDisruptionBudget{budget("db", 0, "db")}}},
		{name: "two budgets over one pod",
			in: PreviewInput{Pods: []corev1.Pod{pod("db-0", controlled("StatefulSet", "db"), labelled("app", "db"), isReady)},
				OtherPods: []corev1.Pod{pod("db-1", controlled("StatefulSet", "db"), isReady, on("n1"))},
				Budgets:   []policyv1.PodDisruptionBudget{budget("a", 1, "db"), budget("b", 1, "db")}, Nodes: []corev1.Node{big}},
			want: []string{"MultiplePDBs pod ns/db-0"}, detail: "under 2 PodDisruptionBudgets (a, b)"},
		{name: "single replica Deployment is an outage, named by its Deployment",
			in: PreviewInput{Pods: []corev1.Pod{pod("cart-1-x", controlled("ReplicaSet", "cart-1"), isReady)},
				ReplicaSets: []appsv1.ReplicaSet{rsOf("cart-1", "cart")}, Nodes: []corev1.Node{big}},
			want: []string{"AllReplicasOnNode Deployment ns/cart"}, detail: "Deployment ns/cart has every ready replica on node n0 (1: ns/cart-1-x): the drain takes it down"},
		{name: "a ready replica of another ReplicaSet of the same Deployment elsewhere is no outage",
			in: PreviewInput{Pods: []corev1.Pod{pod("cart-1-x", controlled("ReplicaSet", "cart-1"), isReady)},
				OtherPods:   []corev1.Pod{pod("cart-2-y", controlled("ReplicaSet", "cart-2"), isReady, on("n1"))},
				ReplicaSets: []appsv1.ReplicaSet{rsOf("cart-1", "cart"), rsOf("cart-2", "cart")}, Nodes: []corev1.Node{big}}},
		{name: "a replica elsewhere that is not ready does not count",
			in: PreviewInput{Pods: []corev1.Pod{pod("db-0", controlled("StatefulSet", "db"), isReady)},
				OtherPods: []corev1.Pod{pod("db-1", controlled("StatefulSet", "db"), on("n1"))}, Nodes: []corev1.Node{big}},
			want: []string{"AllReplicasOnNode StatefulSet ns/db"}},
		{name: "bare pod and emptyDir",
			in:   PreviewInput{Pods: []corev1.Pod{pod("bare", emptyDir)}},
			want: []string{"NoController pod ns/bare", "EmptyDirData pod ns/bare"}, detail: "pod ns/bare has no controller: it will be deleted and not recreated elsewhere"},
		{name: "DaemonSet pods and pods left out by the selector have no risks",
			in: PreviewInput{Pods: []corev1.Pod{pod("ds", ownedBy("DaemonSet", "apps/v1"), emptyDir, isReady), pod("other", emptyDir)},
				Policy: &nmv1beta1.DrainPolicy{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "none"}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPreview(t, tt.in)
			if got := kinds(p); !slices.Equal(got, tt.want) {
				t.Errorf("risks = %q, want %q", got, tt.want)
			}
			for _, r := range p.Risks {
				if r.Blocker != (r.Kind == RiskBudgetAllowsNone || r.Kind == RiskMultipleBudgets) {
					t.Errorf("%s: Blocker = %v", r.Kind, r.Blocker)
				}
			}
			if tt.detail != "" && !slices.ContainsFunc(p.Risks, func(r Risk) bool { return strings.Contains(r.Message, tt.detail) }) {
				t.Errorf("no risk message holds %q: %+v", tt.detail, p.Risks)
			}
			if len(p.Blockers())+len(p.Warnings()) != len(p.Risks) {
				t.Errorf("Blockers and Warnings do not partition the risks")
			}
		})
	}
}

// The capacity estimate: first fit, largest first, on Ready schedulable
// nodes whose labels and taints the pod accepts, counting what the pods
// bound there request.
func TestPreviewCapacity(t *testing.T) {
	evicted := func(name, cpu, mem string, opts ...podOpt) corev1.Pod {
		return pod(name, append([]podOpt{controlled("ReplicaSet", name+"-rs"), requests(cpu, mem)}, opts...)...)
	}
	tainted := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	}
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	notReady := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
	otherPool := func(n *corev1.Node) { n.Labels["pool"] = "b" }
	tests := []struct {
		name     string
		pods     []corev1.Pod
		nodes    []corev1.Node
		others   []corev1.Pod
		unplaced []string
		detail   string
	}{
		{name: "room enough", pods: []corev1.Pod{evicted("a", "2", "1Gi"), evicted("b", "2", "1Gi")},
			nodes: []corev1.Node{previewNode("n1", "4", "4Gi", "110")}},
		{name: "the pods bound there take the room", pods: []corev1.Pod{evicted("a", "2", "1Gi")},
			nodes:    []corev1.Node{previewNode("n1", "4", "4Gi", "110")},
			others:   []corev1.Pod{pod("x", requests("3", "1Gi"), on("n1")), pod("gone", requests("4", "1Gi"), on("n1"), phase(corev1.PodSucceeded))},
			unplaced: []string{"a"}, detail: "ns/a (requests cpu 2, memory 1Gi): the 1 node it may run on lack the free CPU, memory or pod slots"},
		{name: "largest first fills the nodes better than arrival order",
			pods:  []corev1.Pod{evicted("small", "1", "1Gi"), evicted("large", "3", "1Gi")},
			nodes: []corev1.Node{previewNode("n1", "3", "4Gi", "110"), previewNode("n2", "1", "4Gi", "110")}},
		{name: "pod slots", pods: []corev1.Pod{evicted("a", "0", "0"), evicted("b", "0", "0")},
			nodes: []corev1.Node{previewNode("n1", "4", "4Gi", "1")}, unplaced: []string{"b"}},
		{name: "tainted, cordoned, not Ready and unmatched nodes do not count", pods: []corev1.Pod{evicted("a", "1", "1Gi", selects("pool", "a"))},
			nodes: []corev1.Node{previewNode("n1", "4", "4Gi", "110", tainted), previewNode("n2", "4", "4Gi", "110", cordoned),
				previewNode("n3", "4", "4Gi", "110", notReady), previewNode("n4", "4", "4Gi", "110", otherPool), previewNode(drained, "64", "64Gi", "110")},
			unplaced: []string{"a"}, detail: "no other Ready, schedulable node matches its node selector, affinity and tolerations"},
		{name: "a tolerated taint is no obstacle", pods: []corev1.Pod{evicted("a", "1", "1Gi", func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu"}}
		})}, nodes: []corev1.Node{previewNode("n1", "4", "4Gi", "110", tainted)}},
		{name: "pods without a controller are not placed", pods: []corev1.Pod{pod("bare", requests("64", "1Gi"))},
			nodes: []corev1.Node{previewNode("n1", "4", "4Gi", "110")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPreview(t, PreviewInput{Pods: tt.pods, Nodes: tt.nodes, OtherPods: tt.others})
			var got []string
			for _, n := range p.Unplaced {
				got = append(got, n.Name)
			}
			if !slices.Equal(got, tt.unplaced) {
				t.Errorf("Unplaced = %v, want %v", got, tt.unplaced)
			}
			i := slices.IndexFunc(p.Risks, func(r Risk) bool { return r.Kind == RiskNoRoom })
			if (i >= 0) != (len(tt.unplaced) > 0) {
				t.Fatalf("risks %q, unplaced %v", kinds(p), tt.unplaced)
			}
			if i >= 0 && !strings.Contains(p.Risks[i].Message, "first-fit estimate") {
				t.Errorf("the capacity risk does not say it is an estimate: %s", p.Risks[i].Message)
			}
			if tt.detail != "" && (i < 0 || !strings.Contains(p.Risks[i].Message, tt.detail)) {
				t.Errorf("capacity risk does not hold %q: %+v", tt.detail, p.Risks)
			}
		})
	}
}

func TestPreviewSummary(t *testing.T) {
	p := mustPreview(t, PreviewInput{Pods: []corev1.Pod{pod("bare"), pod("ds", ownedBy("DaemonSet", "apps/v1")), pod("leaving", terminating)}})
	want := "A drain of node n0 now would evict 1 pod, leave 1 (DaemonSet pod (1)) and wait for 1; 0 blockers, 1 warning"
	if got := p.Summary(); got != want {
		t.Errorf("Summary() =\n%s\nwant\n%s", got, want)
	}
}

// A reader that bounded its lists says so: no capacity estimate, no
// capacity risk, and the summary says why.
func TestPreviewWithoutCapacity(t *testing.T) {
	big := pod("big", controlled("ReplicaSet", "big-rs"), requests("64", "1Gi"))
	in := PreviewInput{Pods: []corev1.Pod{big}, Nodes: []corev1.Node{previewNode("n1", "4", "4Gi", "110")}}
	if p := mustPreview(t, in); len(p.Unplaced) != 1 {
		t.Fatalf("with the nodes listed, Unplaced = %v, want the big pod", p.Unplaced)
	}
	in.NoCapacity = "the cluster runs more than 1000 pods"
	p := mustPreview(t, in)
	if len(p.Unplaced) != 0 || slices.ContainsFunc(p.Risks, func(r Risk) bool { return r.Kind == RiskNoRoom }) {
		t.Errorf("without the estimate: Unplaced %v, risks %q", p.Unplaced, kinds(p))
	}
	if want := "; room on the other nodes not estimated: the cluster runs more than 1000 pods"; !strings.HasSuffix(p.Summary(), want) {
		t.Errorf("Summary() = %q, want it to end with %q", p.Summary(), want)
	}
}

// A namespace whose other pods a bounded reader did not list gets no
// AllReplicasOnNode risk (it would be a guess), and the summary says so.
func TestPreviewWithoutOutageCheck(t *testing.T) {
	in := PreviewInput{Pods: []corev1.Pod{pod("cart-1-x", controlled("ReplicaSet", "cart-1"), isReady)},
		Nodes: []corev1.Node{previewNode("n1", "8", "16Gi", "110")}}
	if got := kinds(mustPreview(t, in)); !slices.Equal(got, []string{"AllReplicasOnNode ReplicaSet ns/cart-1"}) {
		t.Fatalf("with the namespace listed, risks = %q", got)
	}
	in.NoOutageCheck = map[string]string{"ns": "namespace ns has more than 500 pods"}
	p := mustPreview(t, in)
	if got := kinds(p); len(got) != 0 {
		t.Errorf("without the namespace's pods, risks = %q, want none", got)
	}
	if want := "; whether workloads have ready replicas elsewhere not checked: namespace ns has more than 500 pods"; !strings.HasSuffix(p.Summary(), want) {
		t.Errorf("Summary() = %q, want it to end with %q", p.Summary(), want)
	}
}

// A bounded reader checks a workload against the ready replicas its
// controller's status counts (ByStatus) instead of the pods of other nodes:
// given a status that counts the same pods, both ways find the same
// outages, and a pod that stays on the node is no replica elsewhere either
// way.
func TestPreviewOutageByStatusAgreesWithThePods(t *testing.T) {
	rs := func(name, deployment string) appsv1.ReplicaSet {
		r := appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		if deployment != "" {
			r.OwnerReferences = []metav1.OwnerReference{{Kind: "Deployment", APIVersion: "apps/v1", Name: deployment, Controller: ptrTrue()}}
		}
		return r
	}
	sts := appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"}}
	keep := &nmv1beta1.DrainPolicy{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"evict": "yes"}}}
	for _, tt := range []struct {
		name   string
		pods   []corev1.Pod // on the node
		others []corev1.Pod // on other nodes
		policy *nmv1beta1.DrainPolicy
		want   []string
	}{
		{name: "Deployment with its one replica here",
			pods: []corev1.Pod{pod("cart-1-x", controlled("ReplicaSet", "cart-1"), isReady)},
			want: []string{"AllReplicasOnNode Deployment ns/cart"}},
		{name: "Deployment with a ready replica of its other ReplicaSet elsewhere",
			pods:   []corev1.Pod{pod("cart-1-x", controlled("ReplicaSet", "cart-1"), isReady)},
			others: []corev1.Pod{pod("cart-2-y", controlled("ReplicaSet", "cart-2"), isReady, on("n1"))}},
		{name: "replica elsewhere not ready",
			pods:   []corev1.Pod{pod("cart-1-x", controlled("ReplicaSet", "cart-1"), isReady)},
			others: []corev1.Pod{pod("cart-1-y", controlled("ReplicaSet", "cart-1"), on("n1"))},
			want:   []string{"AllReplicasOnNode Deployment ns/cart"}},
		{name: "bare ReplicaSet with two replicas here",
			pods: []corev1.Pod{pod("solo-a", controlled("ReplicaSet", "solo"), isReady), pod("solo-b", controlled("ReplicaSet", "solo"), isReady)},
			want: []string{"AllReplicasOnNode ReplicaSet ns/solo"}},
		{name: "StatefulSet here and elsewhere",
			pods:   []corev1.Pod{pod("db-0", controlled("StatefulSet", "db"), isReady)},
			others: []corev1.Pod{pod("db-1", controlled("StatefulSet", "db"), isReady, on("n1"))}},
		{name: "StatefulSet only here",
			pods: []corev1.Pod{pod("db-0", controlled("StatefulSet", "db"), isReady)},
			want: []string{"AllReplicasOnNode StatefulSet ns/db"}},
		{name: "a replica the podSelector keeps on the node is not elsewhere",
			pods: []corev1.Pod{pod("db-0", controlled("StatefulSet", "db"), isReady, labelled("evict", "yes")),
				pod("db-1", controlled("StatefulSet", "db"), isReady)},
			policy: keep, want: []string{"AllReplicasOnNode StatefulSet ns/db"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			replicaSets := []appsv1.ReplicaSet{rs("cart-1", "cart"), rs("cart-2", "cart"), rs("solo", "")}
			statefulSets := []appsv1.StatefulSet{sts}
			count := func(kind, name string) (n int32) {
				for _, p := range append(slices.Clone(tt.pods), tt.others...) {
					if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == kind && ref.Name == name && ready(&p) {
						n++
					}
				}
				return n
			}
			for i := range replicaSets {
				replicaSets[i].Status.ReadyReplicas = count("ReplicaSet", replicaSets[i].Name)
			}
			statefulSets[0].Status.ReadyReplicas = count("StatefulSet", "db")

			byPods := mustPreview(t, PreviewInput{Pods: tt.pods, OtherPods: tt.others, ReplicaSets: replicaSets, Policy: tt.policy})
			byStatus := mustPreview(t, PreviewInput{Pods: tt.pods, ReplicaSets: replicaSets, StatefulSets: statefulSets,
				ByStatus: []string{"ns"}, NoCapacity: "the cluster has more than 50 nodes", Policy: tt.policy})
			if got := kinds(byPods); !slices.Equal(got, tt.want) {
				t.Errorf("from the pods: risks = %q, want %q", got, tt.want)
			}
			if got := kinds(byStatus); !slices.Equal(got, tt.want) {
				t.Errorf("from the status: risks = %q, want %q", got, tt.want)
			}
			if len(byStatus.NoOutageCheck) != 0 {
				t.Errorf("from the status: NoOutageCheck %v, want every workload checked", byStatus.NoOutageCheck)
			}
		})
	}
}

// A workload of a ByStatus namespace whose status the input lacks (its
// StatefulSet was deleted between the reads) gets no risk, and the preview
// says it was not checked.
func TestPreviewOutageByStatusWithoutTheStatus(t *testing.T) {
	p := mustPreview(t, PreviewInput{Pods: []corev1.Pod{pod("db-0", controlled("StatefulSet", "db"), isReady)},
		ByStatus: []string{"ns"}, NoCapacity: "the cluster has more than 50 nodes"})
	if got := kinds(p); len(got) != 0 {
		t.Errorf("risks = %q, want none", got)
	}
	if want := "; whether workloads have ready replicas elsewhere not checked: the status of StatefulSet ns/db was not read"; !strings.HasSuffix(p.Summary(), want) {
		t.Errorf("Summary() = %q, want it to end with %q", p.Summary(), want)
	}
}

// OutageReadsOf asks only for what the outage check of the pods a drain may
// evict needs: nothing for bare, DaemonSet, mirror, finished or unready
// pods; the status of ReplicaSets and StatefulSets; the pods of a namespace
// where a pod's controller keeps no count of ready replicas, and then not
// that namespace's StatefulSets.
func TestOutageReadsOf(t *testing.T) {
	in := func(ns string) podOpt { return func(p *corev1.Pod) { p.Namespace = ns } }
	mirror := func(p *corev1.Pod) {
		p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "Node", APIVersion: "v1", Name: drained, Controller: ptrTrue()}}
	}
	node := previewNode(drained, "4", "8Gi", "110")
	got := OutageReadsOf(&node, []corev1.Pod{
		pod("web-1-x", in("shop"), controlled("ReplicaSet", "web-1"), isReady),
		pod("db-0", in("shop"), controlled("StatefulSet", "db"), isReady),
		pod("db-1", in("shop"), controlled("StatefulSet", "db"), isReady),
		pod("job-x", in("batch"), ownedBy("Job", "batch/v1"), isReady),
		pod("queue-0", in("batch"), controlled("StatefulSet", "queue"), isReady),
		pod("bare", in("lonely"), isReady),
		pod("agent", in("system"), ownedBy("DaemonSet", "apps/v1"), isReady),
		pod("static", in("system"), mirror, isReady),
		pod("done", in("done"), controlled("ReplicaSet", "old"), isReady, phase(corev1.PodSucceeded)),
		pod("starting", in("cold"), controlled("ReplicaSet", "new")),
		pod("custom", in("crd"), ownedBy("ReplicaSet", "example.com/v1"), isReady),
	})
	want := OutageReads{PodsOf: []string{"batch", "crd"}, StatusOf: []string{"shop"},
		StatefulSets: []types.NamespacedName{{Namespace: "shop", Name: "db"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("OutageReadsOf = %+v, want %+v", got, want)
	}
}

// The guards are blockers of the preview: a control-plane node, and the last
// schedulable node once every node was listed, unless the policy allows it.
func TestPreviewGuards(t *testing.T) {
	cp := previewNode(drained, "4", "8Gi", "110", func(n *corev1.Node) { n.Labels[validation.ControlPlaneLabel] = "" })
	cordoned := previewNode("other", "4", "8Gi", "110", func(n *corev1.Node) { n.Spec.Unschedulable = true })
	for _, tt := range []struct {
		name  string
		in    PreviewInput
		guard string
	}{
		{name: "control plane", in: PreviewInput{Node: &cp}, guard: "is a control-plane node"},
		{name: "control plane allowed", in: PreviewInput{Node: &cp, Policy: &nmv1beta1.DrainPolicy{AllowControlPlaneNode: true}}},
		{name: "last schedulable", in: PreviewInput{Nodes: []corev1.Node{cordoned}}, guard: "is the last schedulable node of the cluster (no other node takes pods: other (cordoned))"},
		{name: "last schedulable allowed", in: PreviewInput{Nodes: []corev1.Node{cordoned}, Policy: &nmv1beta1.DrainPolicy{AllowLastSchedulableNode: true}}},
		{name: "nodes not all listed", in: PreviewInput{Nodes: []corev1.Node{cordoned}, NoCapacity: "the cluster has more than 100 nodes"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPreview(t, tt.in)
			i := slices.IndexFunc(p.Risks, func(r Risk) bool { return r.Kind == RiskGuard })
			switch {
			case tt.guard == "" && i >= 0:
				t.Errorf("unexpected guard risk: %s", p.Risks[i].Message)
			case tt.guard != "" && i < 0:
				t.Errorf("no guard risk; risks %q", kinds(p))
			case tt.guard != "" && (!p.Risks[i].Blocker || i != 0 || !strings.Contains(p.Risks[i].Message, tt.guard)):
				t.Errorf("guard risk %+v at %d: want the first blocker, saying %q", p.Risks[i], i, tt.guard)
			}
		})
	}
}

// spec.drain.deleteEmptyDirData false: the preview waits for the pods with
// emptyDir data, as the drain does, and names them in a blocker.
func TestPreviewKeepsEmptyDirDataWhenNotAllowed(t *testing.T) {
	pods := []corev1.Pod{pod("scratch", controlled("ReplicaSet", "web-1"), emptyDir), pod("web", controlled("ReplicaSet", "web-1"))}
	p := mustPreview(t, PreviewInput{Pods: pods, Policy: &nmv1beta1.DrainPolicy{DeleteEmptyDirData: ptr.To(false)}})
	if want := []PodReason{{nn("scratch"), WaitLocalData}}; !slices.Equal(p.WaitFor, want) {
		t.Errorf("WaitFor = %v, want %v", p.WaitFor, want)
	}
	blockers := p.Blockers()
	if len(blockers) != 1 || blockers[0].Kind != RiskLocalData || !slices.Equal(blockers[0].Pods, []types.NamespacedName{nn("scratch")}) ||
		!strings.Contains(blockers[0].Message, "pod ns/scratch has emptyDir data and spec.drain.deleteEmptyDirData is false") {
		t.Errorf("blockers %+v, want one EmptyDirDataKept for scratch", blockers)
	}
	if allowed := mustPreview(t, PreviewInput{Pods: pods}); len(allowed.WaitFor) != 0 || len(allowed.Evict) != 2 {
		t.Errorf("by default both pods are evicted: evict %v, wait for %v", allowed.Evict, allowed.WaitFor)
	}
}
