package testcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// PodDeleteDelayAnnotation makes kwok take that long to remove a
	// terminating pod, simulating a slow graceful termination.
	PodDeleteDelayAnnotation = "pod-delete.stage.kwok.x-k8s.io/delay"
	// PauseImage is never pulled: kwok only pretends to run containers.
	PauseImage = "registry.k8s.io/pause:3.10"
)

var nameCounter atomic.Int64

// UniqueName returns a DNS-1123 label that starts with prefix and is unique
// within the test binary (and, through the test name hash, readable in logs).
func UniqueName(t testing.TB, prefix string) string {
	sum := sha256.Sum256([]byte(t.Name()))
	return fmt.Sprintf("%s-%s-%d", prefix, hex.EncodeToString(sum[:])[:6], nameCounter.Add(1))
}

// WaitFor polls cond every 100ms until it returns true, or fails the test
// after timeout with what. Tests may poll; the product never does.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		// Keep the condition's own last word, not the deadline's (client-go's
		// rate limiter refuses a call that would end after it, unwrapped).
		if err != nil && ctx.Err() == nil && !strings.Contains(err.Error(), "would exceed context deadline") {
			lastErr = err
		}
		return ok && err == nil, nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s (last error: %v)", timeout, what, lastErr)
	}
}

// Namespace creates a namespace for the test and deletes it at cleanup.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: UniqueName(t, "ns")}}
	c.create(t, ns)
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// PodOption changes a pod template or a bare pod.
type PodOption func(*corev1.PodSpec, *metav1.ObjectMeta)

// WithEmptyDir gives the pod an emptyDir volume (local data that a drain deletes).
func WithEmptyDir() PodOption {
	return func(s *corev1.PodSpec, _ *metav1.ObjectMeta) {
		s.Volumes = append(s.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
}

// WithRequests makes the pod's container request cpu and memory (e.g. "2",
// "1Gi"), which the scheduler and the drain preview's capacity estimate count.
func WithRequests(cpu, memory string) PodOption {
	return func(s *corev1.PodSpec, _ *metav1.ObjectMeta) {
		for i := range s.Containers {
			s.Containers[i].Resources.Requests = corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
		}
	}
}

// WithTerminationDelay makes kwok take d to remove the pod once it is terminating.
func WithTerminationDelay(d time.Duration) PodOption {
	return func(s *corev1.PodSpec, m *metav1.ObjectMeta) {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[PodDeleteDelayAnnotation] = d.String()
		grace := int64(d/time.Second) + 5
		s.TerminationGracePeriodSeconds = &grace
	}
}

// WithTolerateAll makes the pod tolerate every taint, including the cordon
// taint, so its controller may put its replacement back on a cordoned node.
func WithTolerateAll() PodOption {
	return func(s *corev1.PodSpec, _ *metav1.ObjectMeta) {
		s.Tolerations = append(s.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
	}
}

// WithPreferredNode makes the scheduler prefer node for the pod (preferred
// node affinity on the node's name), without requiring it.
func WithPreferredNode(node string) PodOption {
	return func(s *corev1.PodSpec, _ *metav1.ObjectMeta) {
		s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 100,
				Preference: corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
					{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}},
				}},
			}},
		}}
	}
}

func podSpec(nodeSelector map[string]string, meta *metav1.ObjectMeta, opts []PodOption) corev1.PodSpec {
	spec := corev1.PodSpec{
		NodeSelector:                  nodeSelector,
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		Containers: []corev1.Container{{
			Name:  "app",
			Image: PauseImage,
		}},
	}
	for _, o := range opts {
		o(&spec, meta)
	}
	return spec
}

// workloadTemplate is the selector and pod template of a workload named
// name: pods labelled app=name, placed by nodeSelector.
func workloadTemplate(name string, nodeSelector map[string]string, opts []PodOption) (*metav1.LabelSelector, corev1.PodTemplateSpec) {
	labels := map[string]string{"app": name}
	meta := metav1.ObjectMeta{Labels: labels}
	spec := podSpec(nodeSelector, &meta, opts)
	return &metav1.LabelSelector{MatchLabels: labels}, corev1.PodTemplateSpec{ObjectMeta: meta, Spec: spec}
}

// CreateDeployment creates a Deployment whose pods carry app=name and are placed
// by nodeSelector. It does not wait.
func (c *Cluster) CreateDeployment(t testing.TB, ns, name string, replicas int32, nodeSelector map[string]string, opts ...PodOption) *appsv1.Deployment {
	t.Helper()
	selector, template := workloadTemplate(name, nodeSelector, opts)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas, Selector: selector, Template: template},
	}
	c.create(t, d)
	return d
}

// CreateStatefulSet creates a StatefulSet whose pods carry app=name and are
// placed by nodeSelector (its serviceName names no Service: none is needed
// here). It does not wait.
func (c *Cluster) CreateStatefulSet(t testing.TB, ns, name string, replicas int32, nodeSelector map[string]string, opts ...PodOption) *appsv1.StatefulSet {
	t.Helper()
	selector, template := workloadTemplate(name, nodeSelector, opts)
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       appsv1.StatefulSetSpec{Replicas: &replicas, ServiceName: name, Selector: selector, Template: template},
	}
	c.create(t, s)
	return s
}

// CreatePDB creates a PodDisruptionBudget over the pods labelled app=app.
// Set exactly one of minAvailable or maxUnavailable.
func (c *Cluster) CreatePDB(t testing.TB, ns, app string, minAvailable, maxUnavailable *intstr.IntOrString) *policyv1.PodDisruptionBudget {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable:   minAvailable,
			MaxUnavailable: maxUnavailable,
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		},
	}
	c.create(t, pdb)
	return pdb
}

// CreateDaemonSet creates a DaemonSet placed by nodeSelector.
func (c *Cluster) CreateDaemonSet(t testing.TB, ns, name string, nodeSelector map[string]string) *appsv1.DaemonSet {
	t.Helper()
	selector, template := workloadTemplate(name, nodeSelector, nil)
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       appsv1.DaemonSetSpec{Selector: selector, Template: template},
	}
	c.create(t, ds)
	return ds
}

// CreateBarePod creates a pod without a controller, bound to nodeName.
func (c *Cluster) CreateBarePod(t testing.TB, ns, name, nodeName string, opts ...PodOption) *corev1.Pod {
	t.Helper()
	meta := metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}}
	spec := podSpec(nil, &meta, opts)
	spec.NodeName = nodeName
	pod := &corev1.Pod{ObjectMeta: meta, Spec: spec}
	c.create(t, pod)
	return pod
}

// PodsOnNode lists the pods bound to a node, terminating ones included.
func (c *Cluster) PodsOnNode(ctx context.Context, node string) ([]corev1.Pod, error) {
	list, err := c.Clientset.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// WaitRunningPods waits until n pods matching app=app in ns are Running on node.
func (c *Cluster) WaitRunningPods(t testing.TB, ns, app, node string, n int) {
	t.Helper()
	c.WaitRunningPodsWithin(t, 2*time.Minute, ns, app, node, n)
}

// WaitRunningPodsWithin is WaitRunningPods with a timeout of the caller's:
// a benchmark of thousands of nodes (make bench's P8) gives its pods longer
// than the 2 minutes that catch a broken cluster quickly everywhere else.
func (c *Cluster) WaitRunningPodsWithin(t testing.TB, timeout time.Duration, ns, app, node string, n int) {
	t.Helper()
	WaitFor(t, timeout, fmt.Sprintf("%d running pods app=%s on %s", n, app, node), func(ctx context.Context) (bool, error) {
		list := &corev1.PodList{}
		if err := c.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
			return false, err
		}
		running := 0
		for _, p := range list.Items {
			if p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
			}
		}
		return running == n, nil
	})
}

func (c *Cluster) create(t testing.TB, obj client.Object) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := c.Client.Create(ctx, obj)
		// A namespace's default ServiceAccount appears a moment after the
		// namespace; pods created before that are refused with "forbidden".
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "serviceaccount") {
			return false, nil
		}
		return true, err
	})
	if err != nil {
		t.Fatalf("create %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
	}
}
