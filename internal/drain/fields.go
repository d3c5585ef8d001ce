package drain

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodField is one field of a pod that the drain pass reads: the rules of
// NewPlan, the evictions, the status and the events. The operator's pod
// cache (manager.SlimPod) keeps exactly these fields, so a rule that reads a
// field not listed here would never match in production: list it here, and
// manager's TestSlimPodKeepsWhatTheDrainReads, which runs every rule with
// every spec.drain field set, checks that the cache keeps what it needs.
type PodField struct {
	// Path names the field as the API does.
	Path string
	// Copy sets the field of dst from src. It may share src's values: the
	// cache's objects are read-only.
	Copy func(dst, src *corev1.Pod)
}

// PodFields are the pod fields the drain pass reads, and why.
var PodFields = []PodField{
	// Identity: the plan, the status, the evictions (by name) and the
	// memory of pods evicted moments ago (by UID).
	{"metadata.name", func(d, s *corev1.Pod) { d.Name = s.Name }},
	{"metadata.namespace", func(d, s *corev1.Pod) { d.Namespace = s.Namespace }},
	{"metadata.uid", func(d, s *corev1.Pod) { d.UID = s.UID }},
	// A pod created after the cordon that tolerates the taints stays.
	{"metadata.creationTimestamp", func(d, s *corev1.Pod) { d.CreationTimestamp = s.CreationTimestamp }},
	// Terminating pods are waited for, or count as gone on a dead node.
	{"metadata.deletionTimestamp", func(d, s *corev1.Pod) { d.DeletionTimestamp = s.DeletionTimestamp }},
	{"metadata.deletionGracePeriodSeconds", func(d, s *corev1.Pod) { d.DeletionGracePeriodSeconds = s.DeletionGracePeriodSeconds }},
	// spec.drain.podSelector and Cluster API's drain label.
	{"metadata.labels", func(d, s *corev1.Pod) { d.Labels = s.Labels }},
	// Mirror (static) pods stay; no other annotation is read.
	{"metadata.annotations[" + corev1.MirrorPodAnnotationKey + "]", func(d, s *corev1.Pod) {
		if v, ok := s.Annotations[corev1.MirrorPodAnnotationKey]; ok {
			d.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: v}
		}
	}},
	// The controller: DaemonSet pods stay, the operator's own are evicted
	// last. No other owner is read.
	{"metadata.ownerReferences[controller]", func(d, s *corev1.Pod) {
		if ref := metav1.GetControllerOf(s); ref != nil {
			d.OwnerReferences = []metav1.OwnerReference{*ref}
		}
	}},
	{"spec.nodeName", func(d, s *corev1.Pod) { d.Spec.NodeName = s.Spec.NodeName }},
	// Whether a late pod tolerates the maintenance taints.
	{"spec.tolerations", func(d, s *corev1.Pod) { d.Spec.Tolerations = s.Spec.Tolerations }},
	// spec.drain.deleteEmptyDirData false keeps pods with emptyDir volumes;
	// only those volumes, and only their names and sources, are read.
	{"spec.volumes[emptyDir]", func(d, s *corev1.Pod) {
		for _, v := range s.Spec.Volumes {
			if v.EmptyDir != nil {
				d.Spec.Volumes = append(d.Spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{EmptyDir: v.EmptyDir}})
			}
		}
	}},
	// Finished pods: a completed wait-completed pod, a finished DaemonSet pod.
	{"status.phase", func(d, s *corev1.Pod) { d.Status.Phase = s.Status.Phase }},
}
