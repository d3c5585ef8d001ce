package testcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
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
	// PoolLabel groups the fake nodes of one test; the test's workloads select
	// on it, so tests sharing a cluster never schedule onto each other's nodes.
	PoolLabel = "nodemaintenance.test/pool"
	// KwokNodeAnnotation makes kwok manage a Node as a fake, Ready node.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
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

// Pool is a set of fake nodes reserved for one test's workloads.
type Pool struct {
	c     *Cluster
	Value string
}

// NewPool starts an empty node pool for the test.
func (c *Cluster) NewPool(t testing.TB) *Pool {
	return &Pool{c: c, Value: UniqueName(t, "pool")}
}

// Selector is the node selector that places pods on the pool.
func (p *Pool) Selector() map[string]string { return map[string]string{PoolLabel: p.Value} }

// AddNode adds a fake Ready node to the pool. An empty name picks a unique one.
func (p *Pool) AddNode(t testing.TB, name string) *corev1.Node {
	t.Helper()
	if name == "" {
		name = UniqueName(t, "node")
	}
	return p.c.AddNode(t, name, p.Selector())
}

// AddNodeWithAllocatable adds a fake Ready node to the pool whose capacity
// and allocatable are alloc (cpu, memory, pods), to test what fits where.
// An empty name picks a unique one.
func (p *Pool) AddNodeWithAllocatable(t testing.TB, name string, alloc corev1.ResourceList) *corev1.Node {
	t.Helper()
	if name == "" {
		name = UniqueName(t, "node")
	}
	node := FakeNode(name, p.Selector())
	node.Status.Capacity, node.Status.Allocatable = alloc.DeepCopy(), alloc.DeepCopy()
	node = p.c.addNode(t, node)
	p.c.WaitNotReadyTaintGone(t, node)
	return node
}

// WaitNotReadyTaintGone waits until kube-controller-manager has removed the
// node.kubernetes.io/not-ready taint of a new node, which it does moments
// after kwok reports the node Ready: until then nothing is scheduled there,
// and a drain preview says there is no room on it.
func (c *Cluster) WaitNotReadyTaintGone(t testing.TB, node *corev1.Node) {
	t.Helper()
	name := node.Name
	WaitFor(t, time.Minute, "node "+name+" to lose its not-ready taint", func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return false, err
		}
		for _, taint := range node.Spec.Taints {
			if taint.Key == corev1.TaintNodeNotReady {
				return false, nil
			}
		}
		return true, nil
	})
}

// AddNode creates a fake node managed by kwok, waits until it is Ready and
// deletes it at cleanup.
func (c *Cluster) AddNode(t testing.TB, name string, labels map[string]string) *corev1.Node {
	t.Helper()
	return c.addNode(t, FakeNode(name, labels))
}

func (c *Cluster) addNode(t testing.TB, node *corev1.Node) *corev1.Node {
	t.Helper()
	name := node.Name
	c.create(t, node)
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), node) })
	WaitFor(t, time.Minute, "node "+name+" to become Ready", func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			return false, err
		}
		return nodeReady(node), nil
	})
	return node
}

// nodeReady reports whether node's Ready condition is True.
func nodeReady(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// FakeNode is a Node that kwok manages and reports Ready, with room for many pods.
func FakeNode(name string, labels map[string]string) *corev1.Node {
	l := map[string]string{
		"kubernetes.io/hostname": name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
		"type":                   "kwok",
	}
	for k, v := range labels {
		l[k] = v
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      l,
			Annotations: map[string]string{KwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
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

// CreateDeployment creates a Deployment whose pods carry app=name and are placed
// by nodeSelector. It does not wait.
func (c *Cluster) CreateDeployment(t testing.TB, ns, name string, replicas int32, nodeSelector map[string]string, opts ...PodOption) *appsv1.Deployment {
	t.Helper()
	labels := map[string]string{"app": name}
	meta := metav1.ObjectMeta{Labels: labels}
	spec := podSpec(nodeSelector, &meta, opts)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: meta, Spec: spec},
		},
	}
	c.create(t, d)
	return d
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
	labels := map[string]string{"app": name}
	meta := metav1.ObjectMeta{Labels: labels}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: meta, Spec: podSpec(nodeSelector, &meta, nil)},
		},
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
	WaitFor(t, 2*time.Minute, fmt.Sprintf("%d running pods app=%s on %s", n, app, node), func(ctx context.Context) (bool, error) {
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

// StartWaiters runs a Deployment "waiter" of n pods of WaiterImage on the real
// node (its replacements stay Pending once the node is cordoned) and returns
// the pods once their containers run. Each waiter exits exitDelay after
// SIGTERM, and appends what it went through to a file named after its pod in
// signalDir, a hostPath that outlives the pod.
//
// With holdUntilReleased, a waiter also stays, after SIGTERM, until
// ReleaseWaiters(signalDir) is called (or its grace period ends): the test
// decides how long the drain lasts.
func (c *Cluster) StartWaiters(t testing.TB, ns, node, signalDir string, n int32, grace, exitDelay time.Duration, holdUntilReleased bool) []corev1.Pod {
	t.Helper()
	env := []corev1.EnvVar{
		{Name: "EXIT_DELAY", Value: exitDelay.String()},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "SIGNAL_LOG", Value: "/signals/$(POD_NAME)"},
	}
	if holdUntilReleased {
		env = append(env, corev1.EnvVar{Name: "RELEASE_FILE", Value: "/signals/" + waiterReleaseFile})
	}
	labels := map[string]string{"app": "waiter"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "waiter"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(n),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
					TerminationGracePeriodSeconds: ptr.To(int64(grace / time.Second)),
					// Nothing in the pod talks to the API server.
					AutomountServiceAccountToken: ptr.To(false),
					EnableServiceLinks:           ptr.To(false),
					Containers: []corev1.Container{{
						Name:            "app",
						Image:           WaiterImage,
						ImagePullPolicy: corev1.PullNever,
						Env:             env,
						VolumeMounts:    []corev1.VolumeMount{{Name: "signals", MountPath: "/signals"}},
					}},
					Volumes: []corev1.Volume{{Name: "signals", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: signalDir}}}},
				},
			},
		},
	}
	c.create(t, d)
	var pods []corev1.Pod
	WaitFor(t, 2*time.Minute, fmt.Sprintf("%d waiter pods with a running container on %s", n, node), func(ctx context.Context) (bool, error) {
		list := &corev1.PodList{}
		if err := c.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
			return false, err
		}
		pods = pods[:0]
		for _, p := range list.Items {
			if p.Spec.NodeName != node || p.Status.Phase != corev1.PodRunning {
				continue
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Running != nil && cs.ContainerID != "" {
					pods = append(pods, p)
				}
			}
		}
		return len(pods) == int(n), nil
	})
	return pods
}

// waiterReleaseFile is the file in a waiter's signal directory that ends the
// waiters held until released.
const waiterReleaseFile = "release"

// ReleaseWaiters lets the waiters of StartWaiters(..., holdUntilReleased)
// in signalDir exit (after their exit delay).
func ReleaseWaiters(t testing.TB, signalDir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(signalDir, waiterReleaseFile), nil, 0o644); err != nil {
		t.Fatalf("release the waiters of %s: %v", signalDir, err)
	}
}
