package provider_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// TestAccOperatorOnRealNodes installs the operator image `make image` builds
// with nodemaintenance_operator, unchanged, on a kubelet-run node: a real
// Deployment whose pod talks to the API server through the `kubernetes`
// Service (kube-proxy), gets its webhook certificates from cert-controller
// through the Secret the kubelet mounts, passes its probes, and runs as
// 65532:65532 on a read-only root filesystem. The API server calls the webhook
// through its Service. Then a fake node and a second real node, whose pods
// are real containers, are maintained and restored exactly.
//
// One CLI (the first of cliList, NM_TEST_CLI to pick): the cluster, the
// image and the real nodes dominate the run, and both CLIs go through the
// same provider code in the other acceptance tests.
func TestAccOperatorOnRealNodes(t *testing.T) {
	c := testcluster.StartReal(t, "realop", testcluster.Options{RealNodes: 1, KubeProxy: true})
	start := time.Now()
	cli := cliList()[0]
	cliPath, err := testcluster.Tool(cli)
	if err != nil {
		t.Fatal(err)
	}
	archive := buildOperatorImage(t)
	real01 := c.RealNodes[0]
	if err := real01.ImportImage(context.Background(), archive); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster with real node %s and kube-proxy up, operator image imported, in %s", real01.Name, time.Since(start).Round(10*time.Millisecond))

	// Where the time goes: each phase, from the start of the TestCase.
	caseStart := time.Now()
	progress := func(what string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			t.Logf("%s: %s", time.Since(caseStart).Round(10*time.Millisecond), what)
			return nil
		}
	}

	t.Setenv("TF_ACC", "1")
	t.Setenv("CHECKPOINT_DISABLE", "1")
	t.Setenv("TF_ACC_TERRAFORM_PATH", cliPath)
	t.Setenv("TF_ACC_PROVIDER_NAMESPACE", "hashicorp")

	ns := "nmo-real"
	// The only node at installation is real01: the operator's pods land
	// there and nowhere else (kwok would "run" them on a fake node). The
	// maintained nodes come after.
	install := providerBlock(c) + fmt.Sprintf(`
resource "nodemaintenance_operator" "this" {
  namespace = %q
}
`, ns)
	var (
		real02     *testcluster.RealNode
		fakeNode   string
		before     = map[string]*corev1.Node{}
		signalDir  string
		waiterPods []string
		maintStart time.Time
	)
	const (
		waiterGrace     = 10 * time.Second
		waiterExitDelay = 2 * time.Second
	)
	maintenances := install + `
resource "nodemaintenance" "fake" {
  node_name = "fake-real-op"
  reason    = "fake node beside real ones"
  depends_on = [nodemaintenance_operator.this]
}

resource "nodemaintenance" "real" {
  node_name = "real02"
  reason    = "real node, real containers"
  depends_on = [nodemaintenance_operator.this]
}
`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories,
		CheckDestroy: func(s *terraform.State) error {
			_ = progress("operator destroyed")(s)
			err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: config.OperatorName}, &appsv1.Deployment{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("the operator Deployment is still there after destroy (%v)", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				// 15 s to 2 min here, as on any cluster: cert-controller
				// fills the Secret after the pod started, and the kubelet
				// brings it into the mounted volume at its next sync of the
				// pod (syncFrequency, 1 min, plus jitter); the webhook, and so
				// readiness, wait for it.
				Config: install,
				Check: resource.ComposeTestCheckFunc(
					progress("operator installed"),
					operatorRunsOn(c, ns, real01),
					webhookThroughService(c, ns),
				),
			},
			{
				PreConfig: func() {
					if err := c.AddRealNode(context.Background(), "real02", nil); err != nil {
						t.Fatal(err)
					}
					real02 = c.RealNodes[1]
					fakeNode = c.AddNode(t, "fake-real-op", nil).Name
					wns := c.Namespace(t)
					c.CreateDeployment(t, wns, "web", 2, map[string]string{"kubernetes.io/hostname": fakeNode})
					c.WaitRunningPods(t, wns, "web", fakeNode, 2)
					signalDir = filepath.Join(real02.HostDir, wns)
					if err := os.MkdirAll(signalDir, 0o755); err != nil {
						t.Fatal(err)
					}
					for _, p := range c.StartWaiters(t, wns, real02.Name, signalDir, 3, waiterGrace, waiterExitDelay) {
						waiterPods = append(waiterPods, p.Name)
					}
					for _, n := range []string{fakeNode, real02.Name} {
						before[n] = getNodeT(t, c, n)
					}
					maintStart = time.Now()
					_ = progress("workloads on the nodes to maintain")(nil)
				},
				Config: maintenances,
				Check: resource.ComposeTestCheckFunc(
					progress("both maintenances Succeeded"),
					resource.TestCheckResourceAttr("nodemaintenance.fake", "phase", string(nmv1beta1.MaintenanceSucceeded)),
					resource.TestCheckResourceAttr("nodemaintenance.real", "phase", string(nmv1beta1.MaintenanceSucceeded)),
					nodeCheck(c, "fake-real-op", cordoned),
					nodeCheck(c, "real02", cordoned),
					func(*terraform.State) error {
						for _, n := range []string{fakeNode, real02.Name} {
							left, err := c.PodsOnNode(context.Background(), n)
							if err != nil {
								return err
							}
							if len(left) != 0 {
								return fmt.Errorf("%d pods left on %s after its maintenance", len(left), n)
							}
						}
						return waitersEndedGracefully(t, signalDir, waiterPods, maintStart, waiterGrace)
					},
					operatorRunsOn(c, ns, real01),
				),
			},
			{
				// The maintenances go; the operator stays and restores the nodes.
				Config: install,
				Check: func(s *terraform.State) error {
					_ = progress("maintenances destroyed")(s)
					for name, b := range before {
						if err := nodeAsBefore(b, getNodeT(t, c, name)); err != nil {
							return err
						}
					}
					return nil
				},
			},
			{
				// A maintenance of the node the operator itself runs on:
				// its pod leaves last, and its replacement on real02 (the
				// fake node is cordoned: kwok would only pretend to run it)
				// finishes the drain.
				PreConfig: func() {
					if err := real02.ImportImage(context.Background(), archive); err != nil {
						t.Fatal(err)
					}
					setUnschedulableT(t, c, fakeNode, true)
					before[real01.Name] = getNodeT(t, c, real01.Name)
					_ = progress("maintenance of the operator's own node")(nil)
				},
				Config: install + fmt.Sprintf(`
resource "nodemaintenance" "self" {
  node_name  = %q
  reason     = "the node the operator runs on"
  depends_on = [nodemaintenance_operator.this]
}
`, real01.Name),
				Check: resource.ComposeTestCheckFunc(
					progress("own node's maintenance Succeeded"),
					resource.TestCheckResourceAttr("nodemaintenance.self", "phase", string(nmv1beta1.MaintenanceSucceeded)),
					nodeCheck(c, real01.Name, cordoned),
					func(*terraform.State) error {
						left, err := c.PodsOnNode(context.Background(), real01.Name)
						if err != nil || len(left) != 0 {
							return fmt.Errorf("%d pods left on %s after its maintenance (%v)", len(left), real01.Name, err)
						}
						return nil
					},
					// The replacement on real02 (known once step 2 has run)
					// finished the drain; it may not be ready yet.
					func(s *terraform.State) error {
						deadline := time.Now().Add(2 * time.Minute)
						for {
							err := operatorRunsOn(c, ns, real02)(s)
							if err == nil || time.Now().After(deadline) {
								return err
							}
							time.Sleep(time.Second)
						}
					},
				),
			},
			{
				Config: install,
				Check: func(s *terraform.State) error {
					_ = progress("own node's maintenance destroyed")(s)
					setUnschedulableT(t, c, fakeNode, false)
					return nodeAsBefore(before[real01.Name], getNodeT(t, c, real01.Name))
				},
			},
		},
	})
}

// setUnschedulableT cordons or uncordons a node as its owner would.
func setUnschedulableT(t *testing.T, c *testcluster.Cluster, name string, unschedulable bool) {
	t.Helper()
	n := getNodeT(t, c, name)
	orig := n.DeepCopy()
	n.Spec.Unschedulable = unschedulable
	if err := c.Client.Patch(context.Background(), n, client.MergeFrom(orig)); err != nil {
		t.Fatalf("set node %s unschedulable=%v: %v", name, unschedulable, err)
	}
}

// buildOperatorImage runs what `make image` runs (hack/image) for the host
// platform, into a scratch directory, and returns the docker-archive.
func buildOperatorImage(t *testing.T) string {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	start := time.Now()
	cmd := exec.Command("go", "run", ".", "-repo", root, "-image", config.DefaultImage, "-out", out, "-platforms", "linux/amd64")
	cmd.Dir = filepath.Join(root, "hack", "image")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the operator image (hack/image, as make image): %v\n%s", err, b)
	}
	archive := filepath.Join(out, "node-maintenance-operator-linux-amd64.docker.tar")
	if _, err := os.Stat(archive); err != nil {
		t.Fatal(err)
	}
	t.Logf("operator image %s built in %s", config.DefaultImage, time.Since(start).Round(10*time.Millisecond))
	return archive
}

// operatorRunsOn checks that every operator pod runs on the real node, ready,
// never restarted, and that its process really runs as 65532:65532 with a
// read-only root filesystem and the webhook certificates the kubelet mounted.
func operatorRunsOn(c *testcluster.Cluster, ns string, n *testcluster.RealNode) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		pods := &corev1.PodList{}
		if err := c.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": config.OperatorName}); err != nil {
			return err
		}
		if len(pods.Items) != int(config.DefaultReplicas) {
			return fmt.Errorf("%d operator pods, want %d", len(pods.Items), config.DefaultReplicas)
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != n.Name {
				return fmt.Errorf("operator pod %s is on %q, not on the real node %s", p.Name, p.Spec.NodeName, n.Name)
			}
			for _, cs := range p.Status.ContainerStatuses {
				if !cs.Ready || cs.State.Running == nil {
					return fmt.Errorf("operator pod %s: container %s not running and ready: %+v", p.Name, cs.Name, cs.State)
				}
				if cs.RestartCount != 0 {
					return fmt.Errorf("operator pod %s: container %s restarted %d times", p.Name, cs.Name, cs.RestartCount)
				}
			}
		}
		procs := 0
		for _, pid := range n.Processes() {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if !strings.Contains(string(cmdline), "--webhook-service-name="+config.WebhookServiceName) {
				continue
			}
			procs++
			status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				return err
			}
			for _, want := range []string{"Uid:\t65532\t65532\t65532\t65532", "Gid:\t65532\t65532\t65532\t65532"} {
				if !strings.Contains(string(status), want) {
					return fmt.Errorf("operator process %d: want %q in its status:\n%s", pid, want, status)
				}
			}
			mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
			if err != nil {
				return err
			}
			if err := rootReadOnlyAndCerts(string(mounts)); err != nil {
				return fmt.Errorf("operator process %d: %w", pid, err)
			}
		}
		if procs != len(pods.Items) {
			return fmt.Errorf("%d operator processes run on %s, want %d", procs, n.Name, len(pods.Items))
		}
		return nil
	}
}

// rootReadOnlyAndCerts checks a container's mountinfo: "/" read-only, and
// the certificate directory mounted (read-only) from the kubelet's volumes.
func rootReadOnlyAndCerts(mountinfo string) error {
	var root, certs string
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		switch f[4] {
		case "/":
			root = f[5]
		case "/tmp/k8s-webhook-server/serving-certs":
			certs = f[5]
		}
	}
	if !strings.HasPrefix(root, "ro") {
		return fmt.Errorf("root filesystem mounted %q, want read-only", root)
	}
	if !strings.HasPrefix(certs, "ro") {
		return fmt.Errorf("certificate directory mounted %q, want a read-only mount", certs)
	}
	return nil
}

// webhookThroughService checks that cert-controller filled the Secret and the
// caBundle, and that the API server asks the webhook behind its Service: a
// NodeMaintenance of a node that does not exist is refused with the
// webhook's own reason.
func webhookThroughService(c *testcluster.Cluster, ns string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		secret := &corev1.Secret{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: config.WebhookSecretName}, secret); err != nil {
			return err
		}
		for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
			if len(secret.Data[k]) == 0 {
				return fmt.Errorf("secret %s has no %s", config.WebhookSecretName, k)
			}
		}
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: config.OperatorName}, vwc); err != nil {
			return err
		}
		for _, w := range vwc.Webhooks {
			if w.ClientConfig.Service == nil || len(w.ClientConfig.CABundle) == 0 {
				return fmt.Errorf("webhook %s: want a Service and a caBundle, have %+v", w.Name, w.ClientConfig)
			}
		}
		nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metaName("no-such-node"), Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: "no-such-node"}}
		err := c.Client.Create(ctx, nm)
		if err == nil {
			_ = c.Client.Delete(ctx, nm)
			return fmt.Errorf("a NodeMaintenance of a node that does not exist was admitted: the webhook was not asked")
		}
		if !strings.Contains(err.Error(), "does not exist") {
			return fmt.Errorf("want the webhook's refusal of a missing node, got: %v", err)
		}
		return nil
	}
}

// waitersEndedGracefully reads each waiter's file: it got SIGTERM after the
// maintenance began and exited by itself within its grace period.
func waitersEndedGracefully(t *testing.T, signalDir string, pods []string, maintStart time.Time, grace time.Duration) error {
	for _, p := range pods {
		b, err := os.ReadFile(filepath.Join(signalDir, p))
		if err != nil {
			return fmt.Errorf("waiter pod %s left no signal log: %w", p, err)
		}
		var sigterm, exit time.Time
		for _, line := range strings.Split(string(b), "\n") {
			ts, msg, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			at, err := time.Parse(time.RFC3339Nano, ts)
			if err != nil {
				continue
			}
			switch {
			case strings.Contains(msg, "got SIGTERM"):
				sigterm = at
			case strings.Contains(msg, "exiting after"):
				exit = at
			}
		}
		if sigterm.IsZero() || exit.IsZero() {
			return fmt.Errorf("waiter pod %s did not log SIGTERM and its exit:\n%s", p, b)
		}
		if sigterm.Before(maintStart) {
			return fmt.Errorf("waiter pod %s got SIGTERM at %s, before the maintenance began (%s)", p, sigterm, maintStart)
		}
		if d := exit.Sub(sigterm); d > grace {
			return fmt.Errorf("waiter pod %s exited %s after SIGTERM, beyond its grace period %s", p, d, grace)
		}
		t.Logf("waiter pod %s: SIGTERM %s after the maintenance began, exited %s later", p, sigterm.Sub(maintStart).Round(time.Millisecond), exit.Sub(sigterm).Round(time.Millisecond))
	}
	return nil
}

func getNodeT(t *testing.T, c *testcluster.Cluster, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	return n
}

// nodeAsBefore compares what a maintenance touches: cordon, taints, labels
// and annotations.
func nodeAsBefore(before, after *corev1.Node) error {
	if before.Spec.Unschedulable != after.Spec.Unschedulable {
		return fmt.Errorf("node %s unschedulable %v, was %v", after.Name, after.Spec.Unschedulable, before.Spec.Unschedulable)
	}
	if !reflect.DeepEqual(before.Spec.Taints, after.Spec.Taints) {
		return fmt.Errorf("node %s taints %v, were %v", after.Name, after.Spec.Taints, before.Spec.Taints)
	}
	if !reflect.DeepEqual(before.Labels, after.Labels) {
		return fmt.Errorf("node %s labels %v, were %v", after.Name, after.Labels, before.Labels)
	}
	if !reflect.DeepEqual(before.Annotations, after.Annotations) {
		return fmt.Errorf("node %s annotations %v, were %v", after.Name, after.Annotations, before.Annotations)
	}
	return nil
}
