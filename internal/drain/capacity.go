package drain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	schedulinghelper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
)

// room is what a node has left for new pods.
type room struct {
	node     *corev1.Node
	cpu, mem int64 // millicores, bytes
	pods     int64
}

// demand is what an evicted pod's replacement asks of a node.
type demand struct {
	pod      *corev1.Pod
	cpu, mem int64
}

// firstFit places the evicted pods that have a controller (the others are
// not recreated) on the other nodes, largest first, each on the first node
// by name that accepts it and has room left, and returns those that fit
// nowhere with the risk that says so (nil when all fit).
func firstFit(drained string, evicted []corev1.Pod, nodes []corev1.Node, others []corev1.Pod) ([]types.NamespacedName, *Risk) {
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
	rooms := freeRooms(drained, nodes, others)
	var unplaced []types.NamespacedName
	why := map[types.NamespacedName]string{}
	for _, d := range demands {
		if reason := place(d, rooms); reason != "" {
			unplaced = append(unplaced, nameOf(d.pod))
			why[nameOf(d.pod)] = reason
		}
	}
	if len(unplaced) == 0 {
		return nil, nil
	}
	return unplaced, noRoomRisk(drained, unplaced, why)
}

// freeRooms is the room left on each other Ready, schedulable node, sorted
// by name: allocatable minus the requests of the pods that run there.
func freeRooms(drained string, nodes []corev1.Node, others []corev1.Pod) []*room {
	var rooms []*room
	byName := map[string]*room{}
	for i := range nodes {
		n := &nodes[i]
		if n.Name == drained || n.Spec.Unschedulable || !validation.NodeReady(n) {
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
		if !ok || finished(pod) {
			continue
		}
		req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
		r.cpu -= req.Cpu().MilliValue()
		r.mem -= req.Memory().Value()
		r.pods--
	}
	return rooms
}

// place takes d's room on the first room that accepts its pod and has room
// left. It returns why the pod fits nowhere, or "" once it is placed.
func place(d demand, rooms []*room) string {
	accepting := 0
	for _, r := range rooms {
		if !accepts(r.node, d.pod) {
			continue
		}
		accepting++
		if r.cpu >= d.cpu && r.mem >= d.mem && r.pods >= 1 {
			r.cpu, r.mem, r.pods = r.cpu-d.cpu, r.mem-d.mem, r.pods-1
			return ""
		}
	}
	name := nameOf(d.pod)
	needs := fmt.Sprintf("requests cpu %s, memory %s", resource.NewMilliQuantity(d.cpu, resource.DecimalSI), resource.NewQuantity(d.mem, resource.BinarySI))
	if accepting == 0 {
		return fmt.Sprintf("%s (%s): no other Ready, schedulable node matches its node selector, affinity and tolerations", name, needs)
	}
	return fmt.Sprintf("%s (%s): the %s it may run on lack the free CPU, memory or pod slots", name, needs, count(accepting, "node"))
}

// noRoomRisk words the pods that fit nowhere, naming at most
// maxPodsPerProblem of them with their reason.
func noRoomRisk(drained string, unplaced []types.NamespacedName, why map[types.NamespacedName]string) *Risk {
	slices.SortFunc(unplaced, compareName)
	reasons := make([]string, 0, min(len(unplaced), maxPodsPerProblem))
	for _, name := range unplaced[:min(len(unplaced), maxPodsPerProblem)] {
		reasons = append(reasons, why[name])
	}
	more := ""
	if extra := len(unplaced) - len(reasons); extra > 0 {
		more = fmt.Sprintf("; and %d more", extra)
	}
	return &Risk{Kind: RiskNoRoom, Subject: "node " + drained, Pods: unplaced, Message: fmt.Sprintf(
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
