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
	"k8s.io/apimachinery/pkg/types"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
)

// PreviewInput is what a drain preview reads from the cluster, at one moment.
// The preview classifies the pods with the drain's own NewPlan and Rules
// (the cordon taken to happen now), so it cannot disagree with the drain
// about which pods leave, stay or are waited for.
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
	// Without a capacity estimate (NoCapacity), those of the namespaces of
	// OutageReads.PodsOf are enough.
	OtherPods []corev1.Pod
	// NoCapacity, when set, says why the capacity is not estimated (a
	// reader bounded what it lists); Nodes and OtherPods are then partial.
	NoCapacity string
	// NoOutageCheck maps the namespaces whose other pods a bounded reader
	// did not list, and that are not in ByStatus, to why: whether their
	// workloads have ready replicas elsewhere is not checked.
	NoOutageCheck map[string]string
	// ReplicaSets of the pods' namespaces name the Deployment of a
	// ReplicaSet's pod; without them the ReplicaSet is the workload.
	ReplicaSets []appsv1.ReplicaSet
	// ByStatus are the namespaces (OutageReads.StatusOf) whose other pods a
	// bounded reader did not list: their workloads are checked against the
	// ready replicas their controllers' status counts (the ReplicaSets',
	// summed per Deployment, and StatefulSets'), which lags the pods by
	// moments, instead of against OtherPods.
	ByStatus []string
	// StatefulSets are those of OutageReads.StatefulSets, for ByStatus.
	StatefulSets []appsv1.StatefulSet
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
	// RiskLocalData: pods with emptyDir data that spec.drain.deleteEmptyDirData
	// false keeps from being evicted: the drain waits until someone deletes
	// them (a blocker).
	RiskLocalData RiskKind = "EmptyDirDataKept"
	// RiskGuard: the maintenance itself would be refused, the node being a
	// control-plane node or the last schedulable one
	// (validation.ValidateNodeGuards) without spec.drain allowing it.
	RiskGuard RiskKind = "RefusedByGuard"
)

// blocking are the kinds that make the drain wait: the apply waits, and
// fails at the drain's or the apply's timeout.
var blocking = map[RiskKind]bool{RiskGuard: true, RiskBudgetAllowsNone: true, RiskMultipleBudgets: true, RiskLocalData: true}

// riskOrder is the order of the kinds in a preview: blockers first.
var riskOrder = []RiskKind{RiskGuard, RiskBudgetAllowsNone, RiskMultipleBudgets, RiskLocalData, RiskOutage, RiskNoRoom, RiskNoController, RiskEmptyDir}

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
	// for replicas elsewhere (AllReplicasOnNode): the input's, and a
	// workload of a ByStatus namespace whose status was not read.
	NoOutageCheck map[string]string
}

// Wait reasons of Preview.WaitFor.
const (
	WaitTerminating = "terminating: the drain waits until it is gone"
	WaitCompleted   = "labelled " + nmv1beta1.DrainLabel + ": " + nmv1beta1.DrainLabelWaitCompleted + ": not evicted, the drain waits until it completes"
	WaitLocalData   = "has emptyDir data and spec.drain.deleteEmptyDirData is false: not evicted, the drain waits until it is deleted"
)

// FirstFitNote says how the capacity is estimated, for outputs and docs.
const FirstFitNote = "a first-fit estimate: the CPU, memory and pod-count requests of the evicted pods that have a controller, " +
	"largest first, against the free allocatable (allocatable minus the requests of the pods bound there) of the other " +
	"Ready, schedulable nodes whose taints the pod tolerates and whose labels match its nodeSelector and required node " +
	"affinity; pod affinity, topology spread and host ports are not considered"

// NewPreview analyses in: the pods are classified by NewPlan under the
// Rules the drain pass would use, the cordon taken to happen at in.Now. The
// only error is a podSelector that is not a valid label selector.
func NewPreview(in PreviewInput) (Preview, error) {
	plan, err := NewPlan(in.Pods, Rules{Policy: in.Policy, Node: in.Node, CordonedAt: in.Now, Now: in.Now})
	if err != nil {
		return Preview{}, err
	}
	p := listPlan(in.Node.Name, plan)
	evicted := append(append([]corev1.Pod{}, plan.ToEvict...), plan.Last...)
	// Finished pods hold nothing and run nothing: evicting them loses
	// nothing, needs no room, and no budget refuses it.
	running := slices.DeleteFunc(slices.Clone(evicted), func(pod corev1.Pod) bool { return finished(&pod) })
	p.Risks = append(p.Risks, budgetRisks(running, in.Budgets)...)
	checked := slices.DeleteFunc(slices.Clone(running), func(pod corev1.Pod) bool { return in.NoOutageCheck[pod.Namespace] != "" })
	outages, unchecked := outageRisks(in, checked)
	p.Risks = append(p.Risks, outages...)
	p.NoOutageCheck = in.NoOutageCheck
	if len(unchecked) > 0 { // a new map: in's is the caller's
		p.NoOutageCheck = map[string]string{}
		maps.Copy(p.NoOutageCheck, in.NoOutageCheck)
		maps.Copy(p.NoOutageCheck, unchecked)
	}
	p.Risks = append(p.Risks, podRisks(running)...)
	if len(plan.LocalData) > 0 {
		p.Risks = append(p.Risks, Risk{Kind: RiskLocalData, Subject: "node " + in.Node.Name, Pods: p.podsOf(WaitLocalData),
			Message: localDataProblem(plan.LocalData)})
	}
	var nodes func() ([]corev1.Node, error)
	if in.NoCapacity == "" { // every node listed
		nodes = func() ([]corev1.Node, error) { return in.Nodes, nil }
	}
	if err := validation.ValidateNodeGuards(in.Node, in.Policy, nodes); err != nil {
		p.Risks = append(p.Risks, Risk{Kind: RiskGuard, Subject: "node " + in.Node.Name, Message: err.Error()})
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

// podsOf are the pods the preview waits for with reason.
func (p Preview) podsOf(reason string) []types.NamespacedName {
	var out []types.NamespacedName
	for _, r := range p.WaitFor {
		if r.Reason == reason {
			out = append(out, r.Pod)
		}
	}
	return out
}

// listPlan is the plan as the preview's three sorted lists: evict, skip and
// wait for.
func listPlan(node string, plan Plan) Preview {
	p := Preview{Node: node}
	for _, pod := range append(append([]corev1.Pod{}, plan.ToEvict...), plan.Last...) {
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
	for _, pod := range plan.LocalData {
		p.WaitFor = append(p.WaitFor, PodReason{Pod: nameOf(&pod), Reason: WaitLocalData})
	}
	slices.SortFunc(p.Evict, compareName)
	sortReasons(p.Skip)
	sortReasons(p.WaitFor)
	return p
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
