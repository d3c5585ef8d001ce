package manager

import (
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
)

// SlimPod is the transform of the pod informers (one per node being
// drained, package nodepods). It keeps exactly the fields the drain pass
// reads (drain.PodFields), plus the type and the resourceVersion the
// informer itself needs: containers, volumes, conditions, other annotations
// and owners, and managed fields are dropped. Strings and values that many
// pods share (namespace, node name, owner kind and API version,
// tolerations) are stored once, so that the operator's memory grows with
// the number of pods it holds and not with their size. Anything that is not
// a pod passes through unchanged.
//
// The cache's objects are read-only (reads hand out deep copies), which is
// what makes sharing safe.
func SlimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: metav1.ObjectMeta{ResourceVersion: pod.ResourceVersion}}
	for _, f := range drain.PodFields {
		f.Copy(slim, pod)
	}
	slim.Namespace = intern(slim.Namespace)
	slim.Spec.NodeName = intern(slim.Spec.NodeName)
	slim.Spec.Tolerations = sharedTolerations(slim.Spec.Tolerations)
	for i := range slim.OwnerReferences {
		ref := &slim.OwnerReferences[i]
		ref.APIVersion, ref.Kind = intern(ref.APIVersion), intern(ref.Kind)
	}
	return slim, nil
}

// sharedValues keeps one value per key, for values that many pods share,
// and at most max keys: past that, values are made but not kept.
type sharedValues[K comparable, V any] struct {
	mu  sync.Mutex
	m   map[K]V
	max int
}

// get returns the value kept for k, or makes it (and keeps it if there is
// room).
func (s *sharedValues[K, V]) get(k K, newValue func() V) V {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[k]; ok {
		return v
	}
	v := newValue()
	if s.m == nil {
		s.m = map[K]V{}
	}
	if len(s.m) < s.max {
		s.m[k] = v
	}
	return v
}

// interned holds the strings pods share: namespaces, node names and owner
// kinds, a few per node and namespace of the cluster. (unique.Make is not
// enough: it forgets its copy once no handle is left, so after a garbage
// collection the next pod of the same node would get a copy of its own.)
var interned = sharedValues[string, string]{max: 1 << 16}

// intern returns the one copy of s that every slimmed pod shares.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return interned.get(s, func() string { return strings.Clone(s) })
}

// tolerationKey is a comparable form of a toleration, for a map key.
type tolerationKey struct {
	key, operator, value, effect string
	seconds                      int64
	hasSeconds                   bool
}

// tolerationList is a comparable form of a short toleration list.
type tolerationList struct {
	n     int
	items [maxSharedTolerations]tolerationKey
}

// maxSharedTolerations is the longest toleration list that is shared.
const maxSharedTolerations = 4

// sharedLists holds the toleration lists pods share, at most 1024 of them.
var sharedLists = sharedValues[tolerationList, []corev1.Toleration]{max: 1024}

// sharedTolerations returns one shared slice per distinct toleration list:
// most pods carry the same two (not-ready and unreachable, 300 s), which the
// API server's admission adds to every pod.
func sharedTolerations(ts []corev1.Toleration) []corev1.Toleration {
	if len(ts) == 0 {
		return nil
	}
	if len(ts) > maxSharedTolerations {
		return slices.Clone(ts)
	}
	key := tolerationList{n: len(ts)}
	for i, t := range ts {
		key.items[i] = tolerationKey{key: t.Key, operator: string(t.Operator), value: t.Value, effect: string(t.Effect)}
		if t.TolerationSeconds != nil {
			key.items[i].seconds, key.items[i].hasSeconds = *t.TolerationSeconds, true
		}
	}
	return sharedLists.get(key, func() []corev1.Toleration { return slices.Clone(ts) })
}
