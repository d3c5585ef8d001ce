package rollout

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	rolloutvalidation "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1/validation"
)

// resolve records the node set once, when status.nodes is empty. A set
// that cannot be resolved halts the rollout before anything starts; that
// halt is final (a user who fixes the cause creates a new rollout), so a
// node that appears later does not start a rollout halted long ago.
func (r *RolloutReconciler) resolve(ctx context.Context, s *scope) (ctrl.Result, error) {
	if len(s.status.Nodes) > 0 {
		return ctrl.Result{}, nil
	}
	if s.status.Phase == nmv1alpha1.RolloutHalted {
		s.end()
		return ctrl.Result{}, nil
	}
	names, problem, err := r.nodeSet(ctx, s.ro)
	if err != nil {
		return ctrl.Result{}, err
	}
	if problem == "" {
		var n int
		if n, err = maxUnavailable(s.ro, len(names)); err != nil {
			problem = err.Error()
		} else {
			s.status.Nodes = newRows(names, n)
			s.status.Total = int32(len(names))
			s.status.StartedAt = &metav1.Time{Time: s.now}
			return ctrl.Result{}, nil
		}
	}
	s.problem = problem
	return ctrl.Result{}, nil
}

// nodeSet is the set's node names in order, or a problem a user must fix.
func (r *RolloutReconciler) nodeSet(ctx context.Context, ro *nmv1alpha1.NodeMaintenanceRollout) (names []string, problem string, err error) {
	if ro.Spec.NodeSelector == nil {
		for _, name := range ro.Spec.NodeNames {
			err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{})
			if apierrors.IsNotFound(err) {
				return nil, fmt.Sprintf("node %s of spec.nodeNames does not exist: nothing was started; create the rollout again with existing nodes", name), nil
			}
			if err != nil {
				return nil, "", fmt.Errorf("get node %s of rollout %s: %w", name, ro.Name, err)
			}
		}
		return append([]string(nil), ro.Spec.NodeNames...), "", nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ro.Spec.NodeSelector)
	if err != nil {
		return nil, fmt.Sprintf("spec.nodeSelector is invalid: %v", err), nil
	}
	list := &corev1.NodeList{}
	if err := r.Client.List(ctx, list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, "", fmt.Errorf("list the nodes of rollout %s: %w", ro.Name, err)
	}
	for i := range list.Items {
		names = append(names, list.Items[i].Name)
	}
	if len(names) == 0 {
		return nil, fmt.Sprintf("spec.nodeSelector %s matched no node: nothing was started", sel), nil
	}
	sort.Strings(names)
	// The webhook refused a selector too wide for the status; nodes may
	// have joined since.
	if p := rolloutvalidation.SetSizeProblem(fmt.Sprintf("spec.nodeSelector %s", sel), names); p != "" {
		return nil, p + ": nothing was started", nil
	}
	return names, "", nil
}

// newRows are the rows of a newly resolved set, Waiting, in waves of
// maxUnavailable.
func newRows(names []string, maxUnavailable int) []nmv1alpha1.RolloutNode {
	rows := make([]nmv1alpha1.RolloutNode, len(names))
	for i, name := range names {
		rows[i] = nmv1alpha1.RolloutNode{Name: name, Wave: int32(i/maxUnavailable + 1), State: nmv1alpha1.NodeWaiting}
	}
	return rows
}
