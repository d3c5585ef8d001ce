package rollout

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
)

// stepRan moves a StepRunning row on once its Job completed, failed, or
// ran past step.timeout.
func stepRan(row *nmv1alpha1.RolloutNode, o observed, spec *nmv1alpha1.NodeMaintenanceRolloutSpec, now time.Time) time.Duration {
	if o.job == nil {
		return 0 // being created (act)
	}
	if c := jobCondition(o.job, batchv1.JobComplete); c != nil {
		row.StepFinishedAt = stamp(now)
		row.State = nmv1alpha1.NodeRestoring
		return 0
	}
	if c := jobCondition(o.job, batchv1.JobFailed); c != nil {
		fail(row, fmt.Sprintf("step Job %s/%s failed: %s: %s", o.job.Namespace, o.job.Name, c.Reason, c.Message), now)
		return 0
	}
	if spec.Step == nil || spec.Step.Timeout == nil {
		return 0
	}
	left := o.job.CreationTimestamp.Add(spec.Step.Timeout.Duration).Sub(now)
	if left > 0 {
		return left
	}
	fail(row, fmt.Sprintf("step Job %s/%s did not complete within step.timeout %s", o.job.Namespace, o.job.Name, spec.Step.Timeout.Duration), now)
	return 0
}

// jobCondition is the Job's condition of type t when it is True.
func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// newJob is the step Job of node: spec.step.jobTemplate, in step.namespace,
// labelled with the rollout and the node, owned by the rollout, its pod
// pinned to the node and tolerating the maintenance taints.
func (r *RolloutReconciler) newJob(ro *nmv1alpha1.NodeMaintenanceRollout, node string) (*batchv1.Job, error) {
	tmpl := ro.Spec.Step.JobTemplate.DeepCopy()
	job := &batchv1.Job{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	job.Name, job.Namespace, job.GenerateName = jobName(ro.Name, node), ro.Spec.Step.Namespace, ""
	if job.Labels == nil {
		job.Labels = map[string]string{}
	}
	job.Labels[nmv1alpha1.RolloutLabel], job.Labels[nmv1alpha1.RolloutNodeLabel] = ro.Name, node
	pod := &job.Spec.Template.Spec
	pod.NodeName = node
	pod.Tolerations = append(pod.Tolerations, maintenanceTolerations()...)
	if pod.RestartPolicy == "" {
		pod.RestartPolicy = corev1.RestartPolicyNever
	}
	if err := controllerutil.SetControllerReference(ro, job, r.Scheme); err != nil {
		return nil, fmt.Errorf("own Job %s/%s by rollout %s: %w", job.Namespace, job.Name, ro.Name, err)
	}
	return job, nil
}

// maintenanceTolerations tolerate what a maintenance puts on a node: the
// taints it adds (nodestate.MaintenanceTaints: the cordon's
// node.kubernetes.io/unschedulable and the medik8s drain taint).
func maintenanceTolerations() []corev1.Toleration {
	tolerations := make([]corev1.Toleration, 0, len(nodestate.MaintenanceTaints))
	for _, t := range nodestate.MaintenanceTaints {
		tolerations = append(tolerations, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpExists, Effect: t.Effect})
	}
	return tolerations
}

// ensureJob gets or creates the step Job of a StepRunning row. A create the
// API server refuses (a template it finds invalid, a namespace that does
// not exist) fails the node.
func (r *RolloutReconciler) ensureJob(ctx context.Context, s *scope, row nmv1alpha1.RolloutNode, o observed) error {
	if o.job != nil {
		r.created.forget(createdKey(o.job))
		return nil
	}
	job, err := r.newJob(s.ro, row.Name)
	if err != nil {
		return err
	}
	err = r.create(ctx, job)
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.IsForbidden(err), apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsNotFound(err):
		s.refused(row.Name, fmt.Sprintf("the step Job %s/%s of node %s was refused: %v", job.Namespace, job.Name, row.Name, err))
		return nil
	}
	return fmt.Errorf("create step Job %s/%s for node %s of rollout %s: %w", job.Namespace, job.Name, row.Name, s.ro.Name, err)
}
