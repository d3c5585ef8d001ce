package drain

import (
	"cmp"
	"fmt"
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
