package manager

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// lastAppliedAnnotation is kubectl's copy of the applied manifest: often the
// largest part of an object, and never read by a drain.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// SlimPod is the pod cache's transform: it keeps what the drain plan, the
// evictions and the status read (identity, labels, annotations, owners,
// creation and deletion times, node, tolerations, phase) and drops the rest
// (containers, volumes, conditions, managed fields), so that the operator's
// memory grows with the number of pods, not with their size. Anything that
// is not a pod passes through unchanged.
func SlimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	annotations := pod.Annotations
	if _, ok := annotations[lastAppliedAnnotation]; ok {
		annotations = make(map[string]string, len(pod.Annotations)-1)
		for k, v := range pod.Annotations {
			if k != lastAppliedAnnotation {
				annotations[k] = v
			}
		}
	}
	return &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:                       pod.Name,
			Namespace:                  pod.Namespace,
			UID:                        pod.UID,
			ResourceVersion:            pod.ResourceVersion,
			Generation:                 pod.Generation,
			CreationTimestamp:          pod.CreationTimestamp,
			DeletionTimestamp:          pod.DeletionTimestamp,
			DeletionGracePeriodSeconds: pod.DeletionGracePeriodSeconds,
			Labels:                     pod.Labels,
			Annotations:                annotations,
			OwnerReferences:            pod.OwnerReferences,
			Finalizers:                 pod.Finalizers,
		},
		Spec: corev1.PodSpec{
			NodeName:    pod.Spec.NodeName,
			Tolerations: pod.Spec.Tolerations,
		},
		Status: corev1.PodStatus{Phase: pod.Status.Phase},
	}, nil
}
