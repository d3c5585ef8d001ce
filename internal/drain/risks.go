package drain

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

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

// deploymentsOf maps each ReplicaSet a Deployment controls to the
// Deployment's name.
func deploymentsOf(replicaSets []appsv1.ReplicaSet) map[types.NamespacedName]string {
	out := map[types.NamespacedName]string{}
	for i := range replicaSets {
		if ref := metav1.GetControllerOf(&replicaSets[i]); ref != nil && ref.Kind == "Deployment" {
			out[types.NamespacedName{Namespace: replicaSets[i].Namespace, Name: replicaSets[i].Name}] = ref.Name
		}
	}
	return out
}

// readyCounted reports whether the controller ref names a workload whose
// status counts its ready replicas: an apps ReplicaSet (and so the
// Deployment over it, whose ReplicaSets the preview lists) or StatefulSet.
func readyCounted(ref *metav1.OwnerReference) bool {
	return strings.HasPrefix(ref.APIVersion, "apps/") && (ref.Kind == "ReplicaSet" || ref.Kind == "StatefulSet")
}

// readyByStatus is the ready replicas of each workload as its controller's
// status counts them: a ReplicaSet's status.readyReplicas (summed over the
// ReplicaSets of a Deployment) and a StatefulSet's.
func readyByStatus(replicaSets []appsv1.ReplicaSet, statefulSets []appsv1.StatefulSet, deploymentOf map[types.NamespacedName]string) map[workload]int32 {
	out := map[workload]int32{}
	for i := range replicaSets {
		rs := &replicaSets[i]
		w := workload{"ReplicaSet", rs.Namespace, rs.Name}
		if d, ok := deploymentOf[types.NamespacedName{Namespace: rs.Namespace, Name: rs.Name}]; ok {
			w = workload{"Deployment", rs.Namespace, d}
		}
		out[w] += rs.Status.ReadyReplicas
	}
	for i := range statefulSets {
		out[workload{"StatefulSet", statefulSets[i].Namespace, statefulSets[i].Name}] = statefulSets[i].Status.ReadyReplicas
	}
	return out
}

// OutageReads is what the outage check (RiskOutage) of a node's pods needs
// beyond them, for a reader that does not list every pod of the cluster:
// only the namespaces of the pods a drain may evict that run, are ready
// and have a controller. A namespace without such pods needs nothing.
type OutageReads struct {
	// PodsOf are the namespaces whose other pods must be listed: one of
	// their pods has a controller whose status does not count its ready
	// replicas (a Job, a custom controller).
	PodsOf []string
	// StatusOf are the other namespaces: their pods' workloads are
	// ReplicaSets, Deployments and StatefulSets, checked against the ready
	// replicas their status counts (PreviewInput.ByStatus).
	StatusOf []string
	// StatefulSets are the StatefulSets of those pods in StatusOf.
	StatefulSets []types.NamespacedName
}

// OutageReadsOf says what to read for the outage check of pods, all bound
// to node. It looks at the pods the default drain evicts, which are those
// of any spec.drain and more (a spec.drain only keeps more pods on the
// node), so it holds for any policy.
func OutageReadsOf(node *corev1.Node, pods []corev1.Pod) OutageReads {
	plan, _ := NewPlan(pods, Rules{Node: node}) // no policy, no podSelector to fail on
	byPods, byStatus := map[string]bool{}, map[string]bool{}
	var sets []types.NamespacedName
	for i := range plan.ToEvict {
		pod := &plan.ToEvict[i]
		ref := metav1.GetControllerOf(pod)
		if ref == nil || finished(pod) || !ready(pod) {
			continue
		}
		if !readyCounted(ref) {
			byPods[pod.Namespace] = true
			continue
		}
		byStatus[pod.Namespace] = true
		if key := (types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}); ref.Kind == "StatefulSet" && !slices.Contains(sets, key) {
			sets = append(sets, key)
		}
	}
	var out OutageReads
	for ns := range byStatus {
		if !byPods[ns] { // listing the pods answers for every workload of the namespace
			out.StatusOf = append(out.StatusOf, ns)
		}
	}
	out.PodsOf = slices.Collect(maps.Keys(byPods))
	for _, key := range sets {
		if !byPods[key.Namespace] {
			out.StatefulSets = append(out.StatefulSets, key)
		}
	}
	slices.Sort(out.PodsOf)
	slices.Sort(out.StatusOf)
	slices.SortFunc(out.StatefulSets, compareName)
	return out
}

// outageRisks: workloads whose every ready replica is among the pods to
// evict. A workload of a namespace in in.ByStatus is checked against the
// ready replicas its status counts, less its ready pods on the node; one
// whose status the input lacks is named in unchecked (namespace to why).
// Any other is checked against in.OtherPods.
func outageRisks(in PreviewInput, evicted []corev1.Pod) (risks []Risk, unchecked map[string]string) {
	node := in.Node.Name
	deploymentOf := deploymentsOf(in.ReplicaSets)
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
	for i := range in.OtherPods {
		if w, ok := workloadOf(&in.OtherPods[i], deploymentOf); ok && ready(&in.OtherPods[i]) {
			elsewhere[w] = true
		}
	}
	if len(in.ByStatus) > 0 {
		counted := readyByStatus(in.ReplicaSets, in.StatefulSets, deploymentOf)
		onNode := map[workload]int32{} // those that stay count as on the node too: they are not elsewhere
		for i := range in.Pods {
			if w, ok := workloadOf(&in.Pods[i], deploymentOf); ok && ready(&in.Pods[i]) {
				onNode[w]++
			}
		}
		for _, w := range order {
			if !slices.Contains(in.ByStatus, w.namespace) {
				continue
			}
			n, ok := counted[w]
			if !ok {
				if unchecked == nil {
					unchecked = map[string]string{}
				}
				unchecked[w.namespace] = fmt.Sprintf("the status of %s was not read", w)
				elsewhere[w] = true // not a risk: unknown
				continue
			}
			elsewhere[w] = n > onNode[w]
		}
	}
	for _, w := range order {
		if elsewhere[w] {
			continue
		}
		pods := here[w]
		slices.SortFunc(pods, compareName)
		risks = append(risks, Risk{Kind: RiskOutage, Subject: w.String(), Pods: pods, Message: fmt.Sprintf(
			"%s has every ready replica on node %s (%d: %s): the drain takes it down, it does not move it. "+
				"Scale it up and spread it over other nodes first",
			w, node, len(pods), podList(pods))})
	}
	return risks, unchecked
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
		if volumes := EmptyDirVolumes(pod); len(volumes) > 0 {
			out = append(out, Risk{Kind: RiskEmptyDir, Subject: "pod " + name.String(), Pods: []types.NamespacedName{name},
				Message: fmt.Sprintf("pod %s has emptyDir volumes (%s): their data is deleted with the pod", name, strings.Join(volumes, ", "))})
		}
	}
	return out
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

func compareName(a, b types.NamespacedName) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

func sortReasons(rs []PodReason) {
	slices.SortFunc(rs, func(a, b PodReason) int { return compareName(a.Pod, b.Pod) })
}
