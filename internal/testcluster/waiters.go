package testcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StartWaiters runs a Deployment "waiter" of n pods of WaiterImage on the real
// node (its replacements stay Pending once the node is cordoned) and returns
// the pods once their containers run and handle SIGTERM (each said so in its
// signal file). Each waiter exits exitDelay after
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
		if len(pods) != int(n) {
			return false, nil
		}
		// A running container is not yet a waiter that handles SIGTERM: a
		// SIGTERM before its handler is installed kills it silently. Its
		// first line says the handler is there.
		for _, p := range pods {
			b, err := os.ReadFile(filepath.Join(signalDir, p.Name))
			if err != nil || !strings.Contains(string(b), "waiting for SIGTERM") {
				return false, nil
			}
		}
		return true, nil
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
