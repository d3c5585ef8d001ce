package rollout

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

// act does what the status just written says, each step idempotent so
// that the next pass may do it again: the child of a Draining row exists,
// the Job of a StepRunning row exists, the child of a Restoring row (and,
// with onFailure Continue, of a Failed row, and its Job) is deleted. A
// create the API server refused fails its node, in a second status write.
// The rows' actions are independent and run at once (forEach).
func (r *RolloutReconciler) act(ctx context.Context, s *scope) (ctrl.Result, error) {
	rows := s.status.Nodes
	err := forEach(len(rows), func(i int) error { return r.actOn(ctx, s, rows[i], s.obs[rows[i].Name]) })
	if len(s.failures) > 0 {
		for i := range s.status.Nodes {
			if why, ok := s.failures[s.status.Nodes[i].Name]; ok {
				fail(&s.status.Nodes[i], why, s.now)
			}
		}
		s.failures = map[string]string{}
		if _, err := r.summarize(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		if res, err := r.writeStatus(ctx, s); err != nil || s.ended {
			return res, err
		}
	}
	return ctrl.Result{}, err
}

func (r *RolloutReconciler) actOn(ctx context.Context, s *scope, row nmv1alpha1.RolloutNode, o observed) error {
	switch row.State {
	case nmv1alpha1.NodeDraining:
		return r.ensureChild(ctx, s, row, o)
	case nmv1alpha1.NodeStepRunning:
		return r.ensureJob(ctx, s, row, o)
	case nmv1alpha1.NodeRestoring:
		if o.child != nil {
			return r.deleteObject(ctx, o.child)
		}
	case nmv1alpha1.NodeFailed:
		if s.ro.Spec.OnFailure != nmv1alpha1.RolloutContinue {
			return nil // the node stays as its maintenance left it
		}
		if o.child != nil {
			if err := r.deleteObject(ctx, o.child); err != nil {
				return err
			}
		}
		if o.job != nil {
			return r.deleteObject(ctx, o.job)
		}
	}
	return nil
}
