package drain

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	schedulinghelper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
)

// PreviewInput is what a drain preview reads from the cluster, at one moment.
// The preview classifies the pods with the drain's own rules (Filters and
// NewPlan, the cordon taken to happen now), so it cannot disagree with the
// drain about which pods leave.
type PreviewInput struct {
	// Node is the node that would be put into maintenance.
	Node *corev1.Node
	// Pods are the pods bound to Node.
	Pods []corev1.Pod
	// Policy is spec.drain (nil: the default drain).
	Policy *nmv1beta1.DrainPolicy
	// Budgets are the PodDisruptionBudgets of the pods' namespaces (more do
	// no harm).
	Budgets []policyv1.PodDisruptionBudget
	// Nodes are the nodes of the cluster; Node among them is ignored.
	Nodes []corev1.Node
	// OtherPods are the pods bound to other nodes: they hold the room of
	// those nodes and tell whether a workload has ready replicas elsewhere.
	// Without a capacity estimate (NoCapacity), those of the pods'
	// namespaces are enough.
	OtherPods []corev1.Pod
	// NoCapacity, when set, says why the capacity is not estimated (a
	// reader bounded what it lists); Nodes and OtherPods are then partial.
	NoCapacity string
	// NoOutageCheck maps the namespaces whose other pods a bounded reader
	// did not list to why: whether their workloads have ready replicas
	// elsewhere is not checked.
	NoOutageCheck map[string]string
	// ReplicaSets of the pods' namespaces name the Deployment of a
	// ReplicaSet's pod; without them the ReplicaSet is the workload.
	ReplicaSets []appsv1.ReplicaSet
	// Now is when the preview is made; it stands for the cordon.
	Now time.Time
}

// RiskKind is a kind of problem a drain would run into or cause.
type RiskKind string

const (
	// RiskBudgetAllowsNone: a PodDisruptionBudget over pods to evict allows
	// no disruption now; the drain waits (a blocker).
	RiskBudgetAllowsNone RiskKind = "PDBAllowsNoDisruption"
	// RiskMultipleBudgets: a pod to evict is under more than one
	// PodDisruptionBudget, which the Eviction API refuses (a blocker).
	RiskMultipleBudgets RiskKind = "MultiplePDBs"
	// RiskOutage: every ready replica of a workload is on the node: the
	// drain takes it down, it does not move it.
	RiskOutage RiskKind = "AllReplicasOnNode"
	// RiskNoController: a pod without a controller is deleted for good.
	RiskNoController RiskKind = "NoController"
	// RiskEmptyDir: a pod's emptyDir data is lost.
	RiskEmptyDir RiskKind = "EmptyDirData"
	// RiskNoRoom: pods whose replacements fit on no other node (a first-fit
	// estimate).
	RiskNoRoom RiskKind = "InsufficientCapacity"
	// RiskGuard: the maintenance itself would be refused, the node being a
	// control-plane node or the last schedulable one
	// (validation.ValidateNodeGuards) without spec.drain allowing it.
	RiskGuard RiskKind = "RefusedByGuard"
)

// blocking are the kinds that make the drain wait: the apply waits, and
// fails at the drain's or the apply's timeout.
var blocking = map[RiskKind]bool{RiskGuard: true, RiskBudgetAllowsNone: true, RiskMultipleBudgets: true}

// riskOrder is the order of the kinds in a preview: blockers first.
var riskOrder = []RiskKind{RiskGuard, RiskBudgetAllowsNone, RiskMultipleBudgets, RiskOutage, RiskNoRoom, RiskNoController, RiskEmptyDir}

// Risk is one problem, worded for a person: what happens, to which
// object, and what to do.
type Risk struct {
	Kind RiskKind
	// Blocker: the drain will wait on it (the apply waits or fails).
	Blocker bool
	// Subject is the object at fault: "PodDisruptionBudget shop/db",
	// "Deployment shop/cart", "pod shop/cart-0".
	Subject string
	// Pods are the pods of the node it concerns, sorted.
	Pods []types.NamespacedName
	// Message is the whole sentence.
	Message string
}

// PodReason is a pod and why it is where the preview puts it.
type PodReason struct {
	Pod    types.NamespacedName
	Reason string
}

// Preview is what a drain of a node would do now: the pods it evicts, leaves
// and waits for, and the risks. It words its own summary.
type Preview struct {
	Node string
	// Evict are the pods the drain evicts, sorted.
	Evict []types.NamespacedName
	// Skip are the pods that stay on the node, sorted, with the reason.
	Skip []PodReason
	// WaitFor are the pods the drain waits for without evicting them
	// (terminating, or labelled wait-completed), sorted, with the reason.
	WaitFor []PodReason
	// Risks are sorted: blockers first, then by kind and subject.
	Risks []Risk
	// Unplaced are the evicted pods whose replacements fit on no other node
	// by the first-fit estimate, sorted.
	Unplaced []types.NamespacedName
	// NoCapacity says why the capacity was not estimated; empty when it was.
	NoCapacity string
	// NoOutageCheck says, per namespace, why its workloads were not checked
	// for replicas elsewhere (AllReplicasOnNode).
	NoOutageCheck map[string]string
}

// Wait reasons of Preview.WaitFor.
const (
	WaitTerminating = "terminating: the drain waits until it is gone"
	WaitCompleted   = "labelled " + nmv1beta1.DrainLabel + ": " + nmv1beta1.DrainLabelWaitCompleted + ": not evicted, the drain waits until it completes"
)

// FirstFitNote says how the capacity is estimated, for outputs and docs.
const FirstFitNote = "a first-fit estimate: the CPU, memory and pod-count requests of the evicted pods that have a controller, " +
	"largest first, against the free allocatable (allocatable minus the requests of the pods bound there) of the other " +
	"Ready, schedulable nodes whose taints the pod tolerates and whose labels match its nodeSelector and required node " +
	"affinity; pod affinity, topology spread and host ports are not considered"

// NewPreview analyses in. The only error is a podSelector that is not a
// valid label selector.
func NewPreview(in PreviewInput) (Preview, error) {
	p := Preview{Node: in.Node.Name}
	var selected func(*corev1.Pod) bool
	if in.Policy != nil && in.Policy.PodSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(in.Policy.PodSelector)
		if err != nil {
			return Preview{}, fmt.Errorf("spec.drain.podSelector: %w", err)
		}
		selected = func(pod *corev1.Pod) bool { return sel.Matches(labels.Set(pod.Labels)) }
	}
	plan := NewPlan(in.Pods, Filters(in.Now, nodestate.MaintenanceTaints, selected))
	for _, pod := range plan.ToEvict {
		p.Evict = append(p.Evict, nameOf(&pod))
	}
	for _, pod := range plan.Last {
		p.Evict = append(p.Evict, nameOf(&pod))
	}
	for name, reason := range plan.Skipped {
		p.Skip = append(p.Skip, PodReason{Pod: name, Reason: reason})
	}
	for _, pod := range plan.Terminating {
		p.WaitFor = append(p.WaitFor, PodReason{Pod: nameOf(&pod), Reason: WaitTerminating})
	}
	for _, pod := range plan.WaitCompleted {
		p.WaitFor = append(p.WaitFor, PodReason{Pod: nameOf(&pod), Reason: WaitCompleted})
	}
	slices.SortFunc(p.Evict, compareName)
	sortReasons(p.Skip)
	sortReasons(p.WaitFor)

	evicted := append(append([]corev1.Pod{}, plan.ToEvict...), plan.Last...)
	// Finished pods hold nothing and run nothing: evicting them loses
	// nothing, needs no room, and no budget refuses it.
	running := slices.DeleteFunc(slices.Clone(evicted), finished)
	p.Risks = append(p.Risks, budgetRisks(running, in.Budgets)...)
	checked := slices.DeleteFunc(slices.Clone(running), func(pod corev1.Pod) bool { return in.NoOutageCheck[pod.Namespace] != "" })
	p.Risks = append(p.Risks, outageRisks(in.Node.Name, checked, in.OtherPods, in.ReplicaSets)...)
	p.NoOutageCheck = in.NoOutageCheck
	p.Risks = append(p.Risks, podRisks(running)...)
	if err := validation.ValidateControlPlane(in.Node, in.Policy); err != nil {
		p.Risks = append(p.Risks, Risk{Kind: RiskGuard, Subject: "node " + in.Node.Name, Message: err.Error()})
	} else if in.NoCapacity == "" { // all nodes listed
		if err := validation.ValidateLastSchedulable(in.Node, in.Nodes, in.Policy); err != nil {
			p.Risks = append(p.Risks, Risk{Kind: RiskGuard, Subject: "node " + in.Node.Name, Message: err.Error()})
		}
	}
	if p.NoCapacity = in.NoCapacity; p.NoCapacity == "" {
		var noRoom *Risk
		p.Unplaced, noRoom = firstFit(in.Node.Name, running, in.Nodes, in.OtherPods)
		if noRoom != nil {
			p.Risks = append(p.Risks, *noRoom)
		}
	}
	for i := range p.Risks {
		p.Risks[i].Blocker = blocking[p.Risks[i].Kind]
	}
	slices.SortStableFunc(p.Risks, func(a, b Risk) int {
		return cmp.Or(cmp.Compare(slices.Index(riskOrder, a.Kind), slices.Index(riskOrder, b.Kind)), cmp.Compare(a.Subject, b.Subject))
	})
	return p, nil
}

// Blockers are the risks the drain will wait on.
func (p Preview) Blockers() []Risk {
	return slices.DeleteFunc(slices.Clone(p.Risks), func(r Risk) bool { return !r.Blocker })
}

// Warnings are the risks that do not stop the drain: outages, lost data,
// missing room.
func (p Preview) Warnings() []Risk {
	return slices.DeleteFunc(slices.Clone(p.Risks), func(r Risk) bool { return r.Blocker })
}

// Summary is one line: how many pods are evicted, stay (by reason) and are
// waited for, and how many blockers and warnings there are. The lists name
// the pods.
func (p Preview) Summary() string {
	staying := map[string]int{}
	for _, r := range p.Skip {
		staying[r.Reason]++
	}
	s := fmt.Sprintf("A drain of node %s now would evict %s, leave %d", p.Node, count(len(p.Evict), "pod"), len(p.Skip))
	if len(staying) > 0 {
		reasons := make([]string, 0, len(staying))
		for reason, n := range staying {
			reasons = append(reasons, fmt.Sprintf("%s (%d)", reason, n))
		}
		slices.Sort(reasons)
		s += " (" + strings.Join(reasons, ", ") + ")"
	}
	blockers := len(p.Blockers())
	s += fmt.Sprintf(" and wait for %d; %s, %s", len(p.WaitFor), count(blockers, "blocker"), count(len(p.Risks)-blockers, "warning"))
	if p.NoCapacity != "" {
		s += "; room on the other nodes not estimated: " + p.NoCapacity
	}
	if len(p.NoOutageCheck) > 0 {
		why := slices.Sorted(maps.Values(p.NoOutageCheck))
		s += "; whether workloads have ready replicas elsewhere not checked: " + strings.Join(why, ", ")
	}
	return s
}

// count is "1 pod", "2 pods".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// budgetRisks: budgets that allow no disruption now over pods to evict, and
// pods under several budgets.
func budgetRisks(evicted []corev1.Pod, budgets []policyv1.PodDisruptionBudget) []Risk {
	under := map[types.NamespacedName][]string{}
	held := map[int][]types.NamespacedName{}
	for i := range budgets {
		pdb := &budgets[i]
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			continue // the API server validates selectors; nothing to say about one it let through
		}
		for j := range evicted {
			pod := &evicted[j]
			if pod.Namespace != pdb.Namespace || !sel.Matches(labels.Set(pod.Labels)) {
				continue
			}
			under[nameOf(pod)] = append(under[nameOf(pod)], pdb.Name)
			if pdb.Status.DisruptionsAllowed <= 0 {
				held[i] = append(held[i], nameOf(pod))
			}
		}
	}
	var out []Risk
	for i, pods := range held {
		pdb := &budgets[i]
		slices.SortFunc(pods, compareName)
		subject := fmt.Sprintf("PodDisruptionBudget %s/%s", pdb.Namespace, pdb.Name)
		out = append(out, Risk{Kind: RiskBudgetAllowsNone, Subject: subject, Pods: pods, Message: fmt.Sprintf(
			"%s allows no disruption now (%d healthy pods, %d required): the drain will wait to evict %s until it does. "+
				"Scale the workload up or relax the budget first",
			subject, pdb.Status.CurrentHealthy, pdb.Status.DesiredHealthy, podList(pods))})
	}
	for pod, names := range under {
		if len(names) < 2 {
			continue
		}
		slices.Sort(names)
		out = append(out, Risk{Kind: RiskMultipleBudgets, Subject: "pod " + pod.String(), Pods: []types.NamespacedName{pod}, Message: fmt.Sprintf(
			"pod %s is under %d PodDisruptionBudgets (%s): the Eviction API refuses to evict it, so the drain will wait for it. "+
				"Make the budgets' selectors disjoint", pod, len(names), strings.Join(names, ", "))})
	}
	return out
}

// workload names the workload of a pod: the Deployment of a ReplicaSet's
// pod when the ReplicaSets say so, its controller otherwise.
type workload struct{ kind, namespace, name string }

func (w workload) String() string { return fmt.Sprintf("%s %s/%s", w.kind, w.namespace, w.name) }

func workloadOf(pod *corev1.Pod, deploymentOf map[types.NamespacedName]string) (workload, bool) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return workload{}, false
	}
	if ref.Kind == "ReplicaSet" {
		if d, ok := deploymentOf[types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}]; ok {
			return workload{"Deployment", pod.Namespace, d}, true
		}
	}
	return workload{ref.Kind, pod.Namespace, ref.Name}, true
}

// outageRisks: workloads whose every ready replica is among the pods to
// evict.
func outageRisks(node string, evicted, others []corev1.Pod, replicaSets []appsv1.ReplicaSet) []Risk {
	deploymentOf := map[types.NamespacedName]string{}
	for i := range replicaSets {
		if ref := metav1.GetControllerOf(&replicaSets[i]); ref != nil && ref.Kind == "Deployment" {
			deploymentOf[types.NamespacedName{Namespace: replicaSets[i].Namespace, Name: replicaSets[i].Name}] = ref.Name
		}
	}
	here := map[workload][]types.NamespacedName{}
	var order []workload
	for i := range evicted {
		if w, ok := workloadOf(&evicted[i], deploymentOf); ok && ready(&evicted[i]) {
			if _, seen := here[w]; !seen {
				order = append(order, w)
			}
			here[w] = append(here[w], nameOf(&evicted[i]))
		}
	}
	elsewhere := map[workload]bool{}
	for i := range others {
		if w, ok := workloadOf(&others[i], deploymentOf); ok && ready(&others[i]) {
			elsewhere[w] = true
		}
	}
	var out []Risk
	for _, w := range order {
		if elsewhere[w] {
			continue
		}
		pods := here[w]
		slices.SortFunc(pods, compareName)
		out = append(out, Risk{Kind: RiskOutage, Subject: w.String(), Pods: pods, Message: fmt.Sprintf(
			"%s has every ready replica on node %s (%d: %s): the drain takes it down, it does not move it. "+
				"Scale it up and spread it over other nodes first",
			w, node, len(pods), podList(pods))})
	}
	return out
}

// podRisks: pods deleted for good, and emptyDir data lost.
func podRisks(evicted []corev1.Pod) []Risk {
	var out []Risk
	for i := range evicted {
		pod := &evicted[i]
		name := nameOf(pod)
		if metav1.GetControllerOf(pod) == nil {
			out = append(out, Risk{Kind: RiskNoController, Subject: "pod " + name.String(), Pods: []types.NamespacedName{name},
				Message: fmt.Sprintf("pod %s has no controller: it will be deleted and not recreated elsewhere", name)})
		}
		var volumes []string
		for _, v := range pod.Spec.Volumes {
			if v.EmptyDir != nil {
				volumes = append(volumes, v.Name)
			}
		}
		if len(volumes) > 0 {
			out = append(out, Risk{Kind: RiskEmptyDir, Subject: "pod " + name.String(), Pods: []types.NamespacedName{name},
				Message: fmt.Sprintf("pod %s has emptyDir volumes (%s): their data is deleted with the pod", name, strings.Join(volumes, ", "))})
		}
	}
	return out
}

// room is what a node has left for new pods.
type room struct {
	node     *corev1.Node
	cpu, mem int64 // millicores, bytes
	pods     int64
}

// firstFit places the evicted pods that have a controller (the others are
// not recreated) on the other nodes, largest first, each on the first node
// by name that accepts it and has room left, and returns those that fit
// nowhere with the risk that says so (nil when all fit).
func firstFit(drained string, evicted []corev1.Pod, nodes []corev1.Node, others []corev1.Pod) ([]types.NamespacedName, *Risk) {
	type demand struct {
		pod      *corev1.Pod
		cpu, mem int64
	}
	var demands []demand
	for i := range evicted {
		if metav1.GetControllerOf(&evicted[i]) == nil {
			continue
		}
		req := resourcehelper.PodRequests(&evicted[i], resourcehelper.PodResourcesOptions{})
		demands = append(demands, demand{&evicted[i], req.Cpu().MilliValue(), req.Memory().Value()})
	}
	if len(demands) == 0 {
		return nil, nil
	}
	slices.SortStableFunc(demands, func(a, b demand) int {
		return cmp.Or(cmp.Compare(b.cpu, a.cpu), cmp.Compare(b.mem, a.mem), compareName(nameOf(a.pod), nameOf(b.pod)))
	})
	var rooms []*room
	byName := map[string]*room{}
	for i := range nodes {
		n := &nodes[i]
		if n.Name == drained || n.Spec.Unschedulable || !nodeIsReady(n) {
			continue
		}
		alloc := n.Status.Allocatable
		r := &room{node: n, cpu: alloc.Cpu().MilliValue(), mem: alloc.Memory().Value(), pods: alloc.Pods().Value()}
		rooms = append(rooms, r)
		byName[n.Name] = r
	}
	slices.SortFunc(rooms, func(a, b *room) int { return cmp.Compare(a.node.Name, b.node.Name) })
	for i := range others {
		pod := &others[i]
		r, ok := byName[pod.Spec.NodeName]
		if !ok || finished(*pod) {
			continue
		}
		req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
		r.cpu -= req.Cpu().MilliValue()
		r.mem -= req.Memory().Value()
		r.pods--
	}
	var unplaced []types.NamespacedName
	why := map[types.NamespacedName]string{}
	for _, d := range demands {
		accepting, placed := 0, false
		for _, r := range rooms {
			if !accepts(r.node, d.pod) {
				continue
			}
			accepting++
			if r.cpu >= d.cpu && r.mem >= d.mem && r.pods >= 1 {
				r.cpu, r.mem, r.pods = r.cpu-d.cpu, r.mem-d.mem, r.pods-1
				placed = true
				break
			}
		}
		if placed {
			continue
		}
		name := nameOf(d.pod)
		unplaced = append(unplaced, name)
		needs := fmt.Sprintf("requests cpu %s, memory %s", resource.NewMilliQuantity(d.cpu, resource.DecimalSI), resource.NewQuantity(d.mem, resource.BinarySI))
		if accepting == 0 {
			why[name] = fmt.Sprintf("%s (%s): no other Ready, schedulable node matches its node selector, affinity and tolerations", name, needs)
		} else {
			why[name] = fmt.Sprintf("%s (%s): the %s it may run on lack the free CPU, memory or pod slots", name, needs, count(accepting, "node"))
		}
	}
	if len(unplaced) == 0 {
		return nil, nil
	}
	slices.SortFunc(unplaced, compareName)
	reasons := make([]string, 0, min(len(unplaced), maxPodsPerProblem))
	for _, name := range unplaced[:min(len(unplaced), maxPodsPerProblem)] {
		reasons = append(reasons, why[name])
	}
	more := ""
	if extra := len(unplaced) - len(reasons); extra > 0 {
		more = fmt.Sprintf("; and %d more", extra)
	}
	return unplaced, &Risk{Kind: RiskNoRoom, Subject: "node " + drained, Pods: unplaced, Message: fmt.Sprintf(
		"%s evicted from node %s would fit on no other node, so their replacements would stay Pending: %s%s. "+
			"Add nodes or free room first (this is a first-fit estimate of requests, not the scheduler's decision)",
		count(len(unplaced), "pod"), drained, strings.Join(reasons, "; "), more)}
}

// accepts reports whether the scheduler could put pod on node as far as
// node labels and taints go: nodeSelector, required node affinity, and the
// NoSchedule and NoExecute taints.
func accepts(node *corev1.Node, pod *corev1.Pod) bool {
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		return false
	}
	_, untolerated := schedulinghelper.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false)
	return !untolerated
}

func nodeIsReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func ready(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func finished(pod corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func nameOf(pod *corev1.Pod) types.NamespacedName {
	return types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
}

func compareName(a, b types.NamespacedName) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

func sortReasons(rs []PodReason) {
	slices.SortFunc(rs, func(a, b PodReason) int { return compareName(a.Pod, b.Pod) })
}
