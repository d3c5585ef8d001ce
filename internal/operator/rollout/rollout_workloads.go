package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain/live"
)

// The workloads of the recovery gate are read from the API server, one get
// each, only for a node that starts (its pods, and the ReplicaSets of the
// pods to evict: evictedWorkloads) and for a restored node under
// recoveryGate Workloads (consistently: available again means now): no
// informer cache, no watch of every Deployment, ReplicaSet and StatefulSet
// of the cluster.
//
// +kubebuilder:rbac:groups=apps,resources=deployments;replicasets;statefulsets,verbs=get

// The kinds of workload the recovery gate waits for.
const (
	kindDeployment  = "Deployment"
	kindReplicaSet  = "ReplicaSet"
	kindStatefulSet = "StatefulSet"
)

// workload is one Deployment, ReplicaSet or StatefulSet.
type workload struct {
	kind, namespace, name string
}

// String is the workload as a row records it: Kind namespace/name.
func (w workload) String() string { return w.kind + " " + w.namespace + "/" + w.name }

// parseWorkload reads a recorded workload; ok is false for anything else.
func parseWorkload(s string) (w workload, ok bool) {
	kind, key, ok1 := strings.Cut(s, " ")
	ns, name, ok2 := strings.Cut(key, "/")
	if !ok1 || !ok2 || ns == "" || name == "" {
		return workload{}, false
	}
	return workload{kind: kind, namespace: ns, name: name}, true
}

// recordWorkloads records, in each row started by this pass, the workloads
// whose pods its drain is going to evict. It runs before the status is
// written, so the record is there before the child that evicts them is
// created; a read that fails ends the pass before anything is written.
func (r *RolloutReconciler) recordWorkloads(ctx context.Context, s *scope) (ctrl.Result, error) {
	before := map[string]nmv1alpha1.RolloutNodeState{}
	for _, row := range s.old.Nodes {
		before[row.Name] = row.State
	}
	var started []*nmv1alpha1.RolloutNode
	for i := range s.status.Nodes {
		if row := &s.status.Nodes[i]; row.State == nmv1alpha1.NodeDraining && before[row.Name] != nmv1alpha1.NodeDraining {
			started = append(started, row)
		}
	}
	// The rows' reads are independent and run at once (forEach).
	err := forEach(len(started), func(i int) error {
		ws, err := r.evictedWorkloads(ctx, s, started[i].Name)
		started[i].Workloads = ws
		return err
	})
	return ctrl.Result{}, err
}

// evictedWorkloads reads the node's pods and names the workloads a drain
// under the rollout's spec.drain would evict pods of.
//
// The pods and their ReplicaSets are read from the API server's watch cache
// as it is (resourceVersion 0), not consistently: a consistent read waits
// for the cache to catch up with etcd, tens of milliseconds on a busy API
// server, and this read holds the node's start (the row's workloads are
// written before its NodeMaintenance is created). It loses nothing a
// consistent read would keep: either is a snapshot taken before the cordon,
// and a pod bound in the milliseconds the cache is behind is no different
// from one bound between the read and the cordon, which neither sees.
func (r *RolloutReconciler) evictedWorkloads(ctx context.Context, s *scope, node string) ([]string, error) {
	pods := &corev1.PodList{}
	if err := r.APIReader.List(ctx, pods, client.MatchingFields{"spec.nodeName": node}, live.AnyVersion); err != nil {
		return nil, fmt.Errorf("list the pods of node %s for rollout %s (the workloads its recovery waits for): %w", node, s.ro.Name, err)
	}
	rules := drain.Rules{Policy: s.ro.Spec.Drain, Node: s.obs[node].node, CordonedAt: s.now, Now: s.now}
	getRS := func(ctx context.Context, key client.ObjectKey) (*appsv1.ReplicaSet, error) {
		rs := &appsv1.ReplicaSet{}
		if err := r.APIReader.Get(ctx, key, rs, live.AnyVersion); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		return rs, nil
	}
	ws, err := workloadsOf(ctx, pods.Items, rules, getRS)
	if err != nil {
		return nil, fmt.Errorf("the workloads on node %s of rollout %s: %w", node, s.ro.Name, err)
	}
	return ws, nil
}

// workloadsOf names, sorted, the workloads whose pods a drain under rules
// evicts (drain.NewPlan, the rules the drain pass and the preview use):
// the controllers of those pods, a ReplicaSet owned by a Deployment named
// as the Deployment. Bare pods, Jobs, DaemonSets and other controllers are
// not named: nothing the gate can read says when they are back. getRS
// reads a ReplicaSet, nil when it does not exist (then nothing is waited
// for).
func workloadsOf(ctx context.Context, pods []corev1.Pod, rules drain.Rules, getRS func(context.Context, client.ObjectKey) (*appsv1.ReplicaSet, error)) ([]string, error) {
	plan, err := drain.NewPlan(pods, rules)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	// A Deployment's pods on one node share their ReplicaSet: each is read
	// once.
	replicaSets := map[client.ObjectKey]*appsv1.ReplicaSet{}
	for _, pod := range append(plan.ToEvict, plan.Last...) {
		ref := metav1.GetControllerOf(&pod)
		if ref == nil || !strings.HasPrefix(ref.APIVersion, "apps/") {
			continue
		}
		w := workload{kind: ref.Kind, namespace: pod.Namespace, name: ref.Name}
		switch ref.Kind {
		case kindStatefulSet:
		case kindReplicaSet:
			key := client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}
			rs, read := replicaSets[key]
			if !read {
				if rs, err = getRS(ctx, key); err != nil {
					return nil, fmt.Errorf("read ReplicaSet %s/%s of pod %s: %w", pod.Namespace, ref.Name, pod.Name, err)
				}
				replicaSets[key] = rs
			}
			if rs == nil {
				continue
			}
			if owner := metav1.GetControllerOf(rs); owner != nil && owner.Kind == kindDeployment && strings.HasPrefix(owner.APIVersion, "apps/") {
				w = workload{kind: kindDeployment, namespace: pod.Namespace, name: owner.Name}
			}
		default:
			continue
		}
		seen[w.String()] = true
	}
	out := make([]string, 0, len(seen))
	for w := range seen {
		out = append(out, w)
	}
	slices.Sort(out)
	return out, nil
}

// readRecovery reads, for each row whose recovery is decided this pass (a
// Restoring row whose child is gone, a Recovering row) under recoveryGate
// Workloads, which of its workloads are not fully available. Each
// workload is read once a pass, however many rows recorded it, and the
// reads run at once (forEach): a wave of 50 restored nodes does not wait
// for 50 reads one after the other.
func (r *RolloutReconciler) readRecovery(ctx context.Context, s *scope) {
	if recoveryGate(s.ro) != nmv1alpha1.RecoveryWorkloads {
		return
	}
	deciding := map[string]bool{}
	index := map[string]int{}
	var workloads []string
	for _, row := range s.status.Nodes {
		o := s.obs[row.Name]
		if row.State != nmv1alpha1.NodeRecovering && (row.State != nmv1alpha1.NodeRestoring || o.child != nil) {
			continue
		}
		deciding[row.Name] = true
		for _, w := range row.Workloads {
			if _, ok := index[w]; !ok {
				index[w] = len(workloads)
				workloads = append(workloads, w)
			}
		}
	}
	why := make([]string, len(workloads))
	_ = forEach(len(workloads), func(i int) error { why[i] = r.notRecovered(ctx, workloads[i]); return nil })
	for _, row := range s.status.Nodes {
		if !deciding[row.Name] {
			continue
		}
		o := s.obs[row.Name]
		o.unrecovered = nil
		for _, w := range row.Workloads {
			if w := why[index[w]]; w != "" {
				o.unrecovered = append(o.unrecovered, w)
			}
		}
		s.obs[row.Name] = o
	}
}

// notRecovered reads one recorded workload and says how available it is
// while it is not fully available, "" once it is. A workload that no
// longer exists is recovered (nothing is left to wait for), as is a
// record of another kind. A workload that cannot be read is not: the gate
// never proceeds blind, and recoveryTimeout bounds the wait.
func (r *RolloutReconciler) notRecovered(ctx context.Context, recorded string) string {
	w, ok := parseWorkload(recorded)
	var obj client.Object
	switch {
	case !ok:
		return ""
	case w.kind == kindDeployment:
		obj = &appsv1.Deployment{}
	case w.kind == kindReplicaSet:
		obj = &appsv1.ReplicaSet{}
	case w.kind == kindStatefulSet:
		obj = &appsv1.StatefulSet{}
	default:
		return ""
	}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: w.namespace, Name: w.name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return ""
	case err != nil:
		return fmt.Sprintf("%s: cannot be read: %v", recorded, err)
	}
	if ok, how := availability(obj); !ok {
		return recorded + ": " + how
	}
	return ""
}
