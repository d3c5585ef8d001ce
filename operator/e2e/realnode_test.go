package e2e

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testoperator"
)

// TestRealNodeMaintenance maintains a node whose pods really run: a kubelet
// with containerd beside kwok's fake nodes. The operator's evictions must
// reach the containers as SIGTERM, and they must end within their grace
// period; the node comes back exactly as it was. A fake node of the same
// cluster is maintained as well, so kwok still manages the fake ones. Then a
// rollout over the real node runs its step there: a real container, while
// the node is drained.
func TestRealNodeMaintenance(t *testing.T) {
	c := testcluster.StartReal(t, "realnode", testcluster.Options{RealNodes: 1})
	ctx, cancel := context.WithTimeout(bg(), 2*time.Minute)
	err := c.InstallCRD(ctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	op, err := testoperator.Start(c, defaultOptions())
	if err != nil {
		t.Fatalf("start the operator: %v", err)
	}
	t.Cleanup(func() {
		start := time.Now()
		op.Stop()
		t.Logf("operator stopped in %s", time.Since(start).Round(10*time.Millisecond))
	})

	t.Run("real node", func(t *testing.T) { testRealNodeDrain(t, c, c.RealNodes[0]) })
	t.Run("lifecycle conditions outlive the kubelet's status posts", func(t *testing.T) { testRealNodeLifecycleConditions(t, c, c.RealNodes[0]) })
	t.Run("fake node beside it", func(t *testing.T) { testFakeNodeBesideRealOne(t, c) })
	t.Run("rollout with a step on the real node", func(t *testing.T) { testRealNodeRolloutStep(t, c, c.RealNodes[0]) })
}

// testRealNodeRolloutStep rolls out over the real node with a step: the
// step Job's container really runs there (it writes a line into a host
// directory of that node) while the node is drained, and the rollout ends
// Succeeded with the node restored exactly.
func testRealNodeRolloutStep(t *testing.T, c *testcluster.Cluster, real *testcluster.RealNode) {
	ns := c.Namespace(t)
	stepDir := filepath.Join(real.HostDir, ns)
	if err := os.MkdirAll(stepDir, 0o755); err != nil {
		t.Fatal(err)
	}
	before := getNode(t, c, real.Name)
	ro := newRollout(t, "real", nmv1alpha1.NodeMaintenanceRolloutSpec{
		NodeNames: []string{real.Name},
		Reason:    "real node rollout e2e",
		Drain:     &nmv1beta1.DrainPolicy{AllowLastSchedulableNode: true},
		Step: &nmv1alpha1.RolloutStep{Namespace: ns, JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{
					Name: "step", Image: testcluster.WaiterImage, ImagePullPolicy: corev1.PullNever,
					Env: []corev1.EnvVar{
						{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
						{Name: "ONCE", Value: "step ran on $(NODE_NAME)"},
						{Name: "SIGNAL_LOG", Value: "/step/step.log"},
					},
					VolumeMounts: []corev1.VolumeMount{{Name: "step", MountPath: "/step"}},
				}},
				Volumes: []corev1.Volume{{Name: "step", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: stepDir}}}},
			}},
		}}},
	})
	createRollout(t, c, ro)
	done := waitRollout(t, c, 3*time.Minute, ro.Name, "phase Succeeded", rolloutPhase(nmv1alpha1.RolloutSucceeded))
	row := rowOf(done, real.Name)
	if row.State != nmv1alpha1.NodeDone {
		t.Fatalf("node %s: state %s (%s), want Done", real.Name, row.State, row.Reason)
	}
	b, err := os.ReadFile(filepath.Join(stepDir, "step.log"))
	if err != nil {
		t.Fatalf("the step's container left no line on node %s: %v", real.Name, err)
	}
	if !strings.Contains(string(b), "step ran on "+real.Name) {
		t.Errorf("the step's line on node %s is %q, want it to name the node", real.Name, b)
	}
	// Its container ran while the node was drained, and ended well.
	assertStepsRanOnDrainedNodes(t, c, ns, done)
	pods := &corev1.PodList{}
	if err := c.Client.List(bg(), pods, client.InNamespace(ns), client.MatchingLabels{"job-name": row.Job}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
				t.Errorf("step container of pod %s on %s: state %+v, want terminated with exit code 0", p.Name, p.Spec.NodeName, cs.State)
			}
		}
	}
	t.Logf("rollout over %s: drained %s, step done %s, restored %s; the step's line: %s", real.Name,
		row.DrainedAt.Format(time.RFC3339), row.StepFinishedAt.Format(time.RFC3339), row.RestoredAt.Format(time.RFC3339), strings.TrimSpace(string(b)))
	after := getNode(t, c, real.Name)
	assertRestored(t, after)
	assertNodeAsBefore(t, before, after)
}

func testRealNodeDrain(t *testing.T, c *testcluster.Cluster, real *testcluster.RealNode) {
	const (
		replicas  = 3
		grace     = 10 * time.Second
		exitDelay = 2 * time.Second
	)
	ns := c.Namespace(t)
	// Each pod's waiter leaves its lines in a file on the node, named after
	// the pod, where they outlive the pod.
	signalDir := filepath.Join(real.HostDir, ns)
	if err := os.MkdirAll(signalDir, 0o755); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	pods := c.StartWaiters(t, ns, real.Name, signalDir, replicas, grace, exitDelay, false)
	t.Logf("%d pods running on %s %s after the Deployment was created (pod IPs %s)", replicas, real.Name, time.Since(started).Round(10*time.Millisecond), podIPs(pods))
	for _, p := range pods {
		if !strings.HasPrefix(p.Status.PodIP, strings.TrimSuffix(real.PodSubnet, "0/24")) {
			t.Errorf("pod %s has IP %q, not one of the node's pod subnet %s", p.Name, p.Status.PodIP, real.PodSubnet)
		}
	}

	// Record every state the containers report until the pods are gone.
	terminated := watchTerminations(t, c, ns)
	before := getNode(t, c, real.Name)
	nmName := "maintain-" + real.Name
	evictStart := time.Now()
	// real01 is the cluster's only node: the guard refuses its
	// maintenance unless the policy says it is meant.
	lastNode := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: nmName},
		Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: real.Name, Reason: "real node e2e", Drain: &nmv1beta1.DrainPolicy{AllowLastSchedulableNode: true}}}
	if err := c.Client.Create(bg(), lastNode); err != nil {
		t.Fatalf("create NodeMaintenance %s for node %s: %v", nmName, real.Name, err)
	}
	t.Cleanup(func() { deleteMaintenance(t, c, nmName) })
	nm := waitPhase(t, c, nmName, nmv1beta1.MaintenanceSucceeded)
	took := time.Since(evictStart)
	t.Logf("maintenance of %s Succeeded after %s: %+v", real.Name, took.Round(10*time.Millisecond), nm.Status)
	assertInMaintenance(t, getNode(t, c, real.Name))
	for _, p := range pods {
		// The container wrote its lines to the node: SIGTERM came, and it
		// exited after its own delay, within the grace period.
		path := filepath.Join(signalDir, p.Name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("pod %s left no signal log: %v", p.Name, err)
			continue
		}
		log := string(b)
		if !strings.Contains(log, "got SIGTERM") || !strings.Contains(log, "exiting after") {
			t.Errorf("pod %s did not log SIGTERM and its exit:\n%s", p.Name, log)
		}
		if st, ok := terminated.get(p.Name); ok {
			if st.ExitCode != 0 {
				t.Errorf("container of pod %s ended with exit code %d (%s), want 0: it should have exited on SIGTERM, not been killed", p.Name, st.ExitCode, st.Reason)
			}
			if took := st.FinishedAt.Sub(evictStart); took > grace+5*time.Second {
				t.Errorf("container of pod %s finished %s after the maintenance began, beyond its grace period %s", p.Name, took, grace)
			}
			t.Logf("pod %s: container terminated exitCode=%d reason=%s; its log:\n%s", p.Name, st.ExitCode, st.Reason, log)
		} else {
			t.Logf("pod %s: its terminated state was not seen before the pod went; its log:\n%s", p.Name, log)
		}
	}
	if took > grace+30*time.Second {
		t.Errorf("the maintenance took %s: containers that exit %s after SIGTERM with a %s grace period should be gone much sooner", took, exitDelay, grace)
	}
	// The Deployment's replacements cannot land on the cordoned node.
	left, err := c.PodsOnNode(bg(), real.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("pods left on %s after the maintenance: %v", real.Name, podNames(left))
	}

	deleteMaintenance(t, c, nmName)
	after := getNode(t, c, real.Name)
	assertRestored(t, after)
	assertNodeAsBefore(t, before, after)
}

func testFakeNodeBesideRealOne(t *testing.T, c *testcluster.Cluster) {
	ns := c.Namespace(t)
	node := deploymentNode(t, c, ns, "web", 2, nil, nil)
	before := getNode(t, c, node)
	name := "maintain-" + node
	createMaintenance(t, c, name, node, "fake node beside a real one")
	waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
	assertInMaintenance(t, getNode(t, c, node))
	if left, err := c.PodsOnNode(bg(), node); err != nil || len(left) != 0 {
		t.Errorf("pods left on %s after the maintenance: %v (%v)", node, podNames(left), err)
	}
	deleteMaintenance(t, c, name)
	assertNodeAsBefore(t, before, getNode(t, c, node))
}

// assertNodeAsBefore checks that what a maintenance touches (cordon,
// taints, labels, annotations) is back exactly as it was.
func assertNodeAsBefore(t *testing.T, before, after *corev1.Node) {
	t.Helper()
	if before.Spec.Unschedulable != after.Spec.Unschedulable {
		t.Errorf("node %s unschedulable %v, was %v", after.Name, after.Spec.Unschedulable, before.Spec.Unschedulable)
	}
	taints := func(n *corev1.Node) []string {
		var out []string
		for _, t := range n.Spec.Taints {
			out = append(out, t.Key+"="+t.Value+":"+string(t.Effect))
		}
		return out
	}
	if !reflect.DeepEqual(taints(before), taints(after)) {
		t.Errorf("node %s taints %v, were %v", after.Name, taints(after), taints(before))
	}
	if !reflect.DeepEqual(before.Labels, after.Labels) {
		t.Errorf("node %s labels %v, were %v", after.Name, after.Labels, before.Labels)
	}
	if !reflect.DeepEqual(before.Annotations, after.Annotations) {
		t.Errorf("node %s annotations %v, were %v", after.Name, after.Annotations, before.Annotations)
	}
}

func podIPs(pods []corev1.Pod) string {
	var ips []string
	for _, p := range pods {
		ips = append(ips, p.Status.PodIP)
	}
	return strings.Join(ips, ", ")
}

// terminations are the terminated container states seen per pod.
type terminations struct {
	mu    sync.Mutex
	state map[string]corev1.ContainerStateTerminated
}

func (s *terminations) get(pod string) (corev1.ContainerStateTerminated, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.state[pod]
	return st, ok
}

// watchTerminations records, until the test ends, the terminated state of
// every container of the pods in ns as the kubelet reports it.
func watchTerminations(t *testing.T, c *testcluster.Cluster, ns string) *terminations {
	s := &terminations{state: map[string]corev1.ContainerStateTerminated{}}
	w, err := c.Clientset.CoreV1().Pods(ns).Watch(bg(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch pods: %v", err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				continue
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.State.Terminated != nil {
					s.mu.Lock()
					s.state[p.Name] = *cs.State.Terminated
					s.mu.Unlock()
				}
			}
		}
	}()
	return s
}
