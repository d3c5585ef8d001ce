package provider_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// TestAccOperatorOnRealNodes installs the operator image `make image` builds
// with nodemaintenance_operator, unchanged, on a kubelet-run node, highly
// available (two replicas): real pods that talk to the API server through
// the `kubernetes` Service (kube-proxy), get their webhook certificates from
// cert-controller through the Secret the kubelet mounts, pass their probes,
// and run as 65532:65532 on a read-only root filesystem. The API server
// calls the webhook through its Service, which spreads racing creates over
// both replicas. Then, in turn:
//   - a fake node and a second real node, whose pods are real containers,
//     are maintained and restored exactly;
//   - the operator is upgraded (a new image through nodemaintenance_operator)
//     in the middle of a drain, which carries on: each pod evicted once, the
//     node restored exactly;
//   - the node the operator itself runs on is maintained: its pods leave
//     after every other pod, their replacements finish the drain.
//
// One CLI (the first of cliList, NM_TEST_CLI to pick): the cluster, the
// image and the real nodes dominate the run, and both CLIs go through the
// same provider code in the other acceptance tests.
func TestAccOperatorOnRealNodes(t *testing.T) {
	c := testcluster.StartReal(t, "realop", testcluster.Options{RealNodes: 1, KubeProxy: true, Audit: true})
	start := time.Now()
	cli := cliList()[0]
	cliPath, err := testcluster.Tool(cli)
	if err != nil {
		t.Fatal(err)
	}
	// The release users install, built from the last commit before the
	// NodeMaintenanceRollout API (so the upgrade is one of code, not a
	// restart of the same binary), and the one they upgrade to: this tree.
	const upgradedImage = config.ImageRepository + ":v0.1.1-upgrade-test"
	archive := buildOperatorImage(t, config.DefaultImage, commitBeforeRollouts)
	upgradeArchive := buildOperatorImage(t, upgradedImage, "")
	real01 := c.RealNodes[0]
	if err := real01.ImportImage(context.Background(), archive); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster with real node %s and kube-proxy up, operator images built, one imported, in %s", real01.Name, time.Since(start).Round(10*time.Millisecond))

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

	const (
		ns             = "nmo-real"
		replicas       = 2
		maxUnavailable = 2
	)
	// The only node at installation is real01: the operator's pods land
	// there and nowhere else (kwok would "run" them on a fake node). The
	// maintained nodes come after, and the fake ones are cordoned or gone
	// before the operator's pods move again.
	install := func(image string) string {
		return providerBlock(c) + fmt.Sprintf(`
resource "nodemaintenance_operator" "this" {
  namespace       = %q
  image           = %q
  replicas        = %d
  max_unavailable = "%d"
  # racesThroughService counts the webhook's refusals.
  max_unavailable_policy = "Refuse"
}
`, ns, image, replicas, maxUnavailable)
	}
	var (
		real02     *testcluster.RealNode
		fakeNode   string
		before     = map[string]*corev1.Node{}
		wns        string
		signalDir  string
		waiterPods []string
		maintStart time.Time
		upgrade    *heldDrain
		oldPods    []string
		ownWaiters *heldDrain
	)
	const (
		waiterGrace     = 10 * time.Second
		waiterExitDelay = 2 * time.Second
	)
	maintenances := install(config.DefaultImage) + `
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
				Config: install(config.DefaultImage),
				Check: resource.ComposeTestCheckFunc(
					progress("operator installed"),
					operatorRunsOn(c, ns, real01, config.DefaultImage, replicas),
					webhookThroughService(c, ns),
					racesThroughService(t, c, ns, real01, maxUnavailable),
					progress("racing creates through the webhook Service done"),
				),
			},
			{
				PreConfig: func() {
					if err := c.AddRealNode(context.Background(), "real02", nil); err != nil {
						t.Fatal(err)
					}
					real02 = c.RealNodes[1]
					fakeNode = c.AddNode(t, "fake-real-op", nil).Name
					wns = c.Namespace(t)
					c.CreateDeployment(t, wns, "web", 2, map[string]string{"kubernetes.io/hostname": fakeNode})
					c.WaitRunningPods(t, wns, "web", fakeNode, 2)
					signalDir = filepath.Join(real02.HostDir, wns)
					if err := os.MkdirAll(signalDir, 0o755); err != nil {
						t.Fatal(err)
					}
					for _, p := range c.StartWaiters(t, wns, real02.Name, signalDir, 3, waiterGrace, waiterExitDelay, false) {
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
					operatorRunsOn(c, ns, real01, config.DefaultImage, replicas),
				),
			},
			{
				// The maintenances go; the operator stays and restores the nodes.
				Config: install(config.DefaultImage),
				Check: func(s *terraform.State) error {
					_ = progress("maintenances destroyed")(s)
					for _, name := range []string{fakeNode, real02.Name} {
						if err := nodeAsBefore(before[name], getNodeT(t, c, name)); err != nil {
							return err
						}
					}
					return nil
				},
			},
			{
				// An upgrade in the middle of a drain: a NodeMaintenance of
				// real02 (made with the API, as any client would, so that
				// the apply below is the upgrade alone) waits for pods that
				// stay after SIGTERM until the test lets them go. The new
				// pods land on real01: real02 is cordoned by then, the fake
				// node by the test.
				PreConfig: func() {
					setUnschedulableT(t, c, fakeNode, true)
					// The waiters of the first maintenance came back to
					// real02 when it was restored; only the held ones
					// below may be there.
					if err := c.Client.Delete(context.Background(), &appsv1.Deployment{ObjectMeta: metaNamespaced(wns, "waiter")}); err != nil {
						t.Fatal(err)
					}
					testcluster.WaitFor(t, time.Minute, "no pods left on "+real02.Name, func(ctx context.Context) (bool, error) {
						left, err := c.PodsOnNode(ctx, real02.Name)
						return len(left) == 0, err
					})
					if err := real01.ImportImage(context.Background(), upgradeArchive); err != nil {
						t.Fatal(err)
					}
					oldPods = operatorPodNames(t, c, ns)
					upgrade = startHeldDrain(t, c, real02, "upgrade", 3)
					_ = progress("drain of real02 under way, held by its pods")(nil)
				},
				Config: install(upgradedImage),
				Check: resource.ComposeTestCheckFunc(
					progress("operator upgraded"),
					eventually(2*time.Minute, operatorRunsOn(c, ns, real01, upgradedImage, replicas)),
					func(*terraform.State) error {
						if now := operatorPodNames(t, c, ns); len(now) != replicas || slices.ContainsFunc(now, func(p string) bool { return slices.Contains(oldPods, p) }) {
							return fmt.Errorf("operator pods after the upgrade %v, before %v: want %d new pods only", now, oldPods, replicas)
						}
						return upgrade.stillDraining()
					},
					// The installation of the old operator already carried
					// the rollout CRD: it is served beside the maintenances
					// the old operator made.
					func(*terraform.State) error {
						return c.Client.List(context.Background(), &nmv1alpha1.NodeMaintenanceRolloutList{})
					},
					func(*terraform.State) error { return upgrade.finish() },
					progress("drain finished by the upgraded operator, node restored"),
				),
			},
			{
				// A maintenance of the node the operator itself runs on,
				// with other pods beside it: the operator's pods leave only
				// after those, and their replacements on real02 finish the
				// drain.
				PreConfig: func() {
					if err := real02.ImportImage(context.Background(), upgradeArchive); err != nil {
						t.Fatal(err)
					}
					ownWaiters = startWaitersOn(t, c, real01, 2, waiterGrace, 3*time.Second, false)
					before[real01.Name] = getNodeT(t, c, real01.Name)
					_ = progress("maintenance of the operator's own node")(nil)
				},
				Config: install(upgradedImage) + fmt.Sprintf(`
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
						return waitersEndedGracefully(t, ownWaiters.signalDir, ownWaiters.pods, ownWaiters.start, waiterGrace)
					},
					func(s *terraform.State) error { return operatorEvictedLast(t, c, ns, ownWaiters, replicas)(s) },
					// The replacements on real02 finished the drain; they
					// may not be ready yet.
					eventually(2*time.Minute, func(s *terraform.State) error {
						return operatorRunsOn(c, ns, real02, upgradedImage, replicas)(s)
					}),
				),
			},
			{
				Config: install(upgradedImage),
				Check: func(s *terraform.State) error {
					_ = progress("own node's maintenance destroyed")(s)
					setUnschedulableT(t, c, fakeNode, false)
					return nodeAsBefore(before[real01.Name], getNodeT(t, c, real01.Name))
				},
			},
		},
	})
}

// eventually retries check for up to d: for what settles after the apply
// (pods that finish terminating or become ready).
func eventually(d time.Duration, check resource.TestCheckFunc) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		deadline := time.Now().Add(d)
		for {
			err := check(s)
			if err == nil || time.Now().After(deadline) {
				return err
			}
			time.Sleep(time.Second)
		}
	}
}

// racesThroughService sends racing creates through the API server, which
// asks the webhook behind its Service; the API server dials a random
// endpoint for each new connection, so the creates spread over the replicas.
// 20 rounds, each of 4 creates for each of two nodes at once, admit exactly
// one per node; 6 creates for 6 nodes admit exactly maxUnavailable. Both
// replicas must have decided some creates (their logs say which): the API
// server reuses its connections, so when all of them happen to lead to one
// replica, rounds of 8 creates per node follow, opening new ones, until both
// have.
func racesThroughService(t *testing.T, c *testcluster.Cluster, ns string, n *testcluster.RealNode, maxUnavailable int) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		var nodes []string
		for i := range 6 {
			nodes = append(nodes, c.AddNode(t, fmt.Sprintf("race-%02d", i), nil).Name)
		}
		var (
			admittedTotal int
			decided       map[string]int
			err           error
		)
		for round := 0; round < 20 || len(decided) < 2; round++ {
			if round == 40 {
				return fmt.Errorf("after %d rounds, only %v decided the racing creates: the API server never asked the other replica", round, decided)
			}
			perNode := 4
			if round >= 20 {
				perNode = 8
			}
			pair := []string{nodes[(2*round)%len(nodes)], nodes[(2*round+1)%len(nodes)]}
			var creates []string
			for i := range 2 * perNode {
				creates = append(creates, pair[i%2])
			}
			admitted, err := createRacing(ctx, c, fmt.Sprintf("race-r%02d", round), creates)
			if err != nil {
				return err
			}
			for _, node := range pair {
				if got := admitted[node]; len(got) != 1 {
					return fmt.Errorf("round %d: %d of %d racing creates for node %s were admitted through the webhook Service (%v), want exactly 1", round, len(got), perNode, node, got)
				}
			}
			admittedTotal += 2
			if err := deleteMaintenancesAndWait(ctx, c, slices.Concat(admitted[pair[0]], admitted[pair[1]])); err != nil {
				return err
			}
			if decided, err = racingDecisions(t, c, ns, n, admittedTotal); err != nil {
				return err
			}
		}
		admitted, err := createRacing(ctx, c, "race-max", nodes)
		if err != nil {
			return err
		}
		var names []string
		for _, got := range admitted {
			names = append(names, got...)
		}
		if len(names) != maxUnavailable {
			return fmt.Errorf("%d of 6 racing creates for 6 nodes were admitted through the webhook Service with max_unavailable = %d (%v), want exactly %d", len(names), maxUnavailable, names, maxUnavailable)
		}
		admittedTotal += len(names)
		if err := deleteMaintenancesAndWait(ctx, c, names); err != nil {
			return err
		}
		if decided, err = racingDecisions(t, c, ns, n, admittedTotal); err != nil {
			return err
		}
		t.Logf("racing creates decided per replica: %v; %d admitted", decided, admittedTotal)
		for _, node := range nodes {
			if err := c.Client.Delete(ctx, &corev1.Node{ObjectMeta: metaName(node)}); err != nil {
				return fmt.Errorf("delete the fake node %s after the races: %w", node, err)
			}
		}
		return nil
	}
}

// racingDecisions counts, per operator pod, the racing creates whose
// admission it logged, and checks that the admissions logged are the
// admittedTotal the API server stored.
func racingDecisions(t *testing.T, c *testcluster.Cluster, ns string, n *testcluster.RealNode, admittedTotal int) (map[string]int, error) {
	decided, admittedLogged := map[string]int{}, 0
	for _, pod := range operatorPodNames(t, c, ns) {
		log, err := n.PodLog(ns, pod)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(log, "\n") {
			if !strings.Contains(line, "a NodeMaintenance create") || !strings.Contains(line, "race-") {
				continue
			}
			decided[pod]++
			if strings.Contains(line, "admitted a NodeMaintenance create") {
				admittedLogged++
			}
		}
	}
	if admittedLogged != admittedTotal {
		return nil, fmt.Errorf("the replicas logged %d admissions of racing creates (%v decided), the API server stored %d", admittedLogged, decided, admittedTotal)
	}
	return decided, nil
}

// createRacing creates, all at once, one NodeMaintenance named prefix-i for
// each nodes[i], and returns the names the API server stored, by node. A
// refusal must be the webhook's: the node taken, or max-unavailable reached.
func createRacing(ctx context.Context, c *testcluster.Cluster, prefix string, nodes []string) (map[string][]string, error) {
	var (
		mu       sync.Mutex
		admitted = map[string][]string{}
		errs     []error
		wg       sync.WaitGroup
	)
	for i, node := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metaName(fmt.Sprintf("%s-%d", prefix, i)), Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node, Reason: "racing create"}}
			err := c.Client.Create(ctx, nm)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				admitted[node] = append(admitted[node], nm.Name)
			case !strings.Contains(err.Error(), "already in maintenance") && !strings.Contains(err.Error(), "--max-unavailable"):
				errs = append(errs, fmt.Errorf("create %s for node %s: refused with an unexpected error: %w", nm.Name, node, err))
			}
		}()
	}
	wg.Wait()
	return admitted, errors.Join(errs...)
}

// deleteMaintenancesAndWait deletes the NodeMaintenances and waits until
// the operator has restored their nodes and they are gone.
func deleteMaintenancesAndWait(ctx context.Context, c *testcluster.Cluster, names []string) error {
	for _, name := range names {
		if err := c.Client.Delete(ctx, &nmv1beta1.NodeMaintenance{ObjectMeta: metaName(name)}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	deadline := time.Now().Add(time.Minute)
	for _, name := range names {
		for {
			err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &nmv1beta1.NodeMaintenance{})
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("NodeMaintenance %s still there a minute after its delete (%v)", name, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// operatorPodNames lists the operator's pods that are not terminating.
func operatorPodNames(t *testing.T, c *testcluster.Cluster, ns string) []string {
	t.Helper()
	pods := &corev1.PodList{}
	if err := c.Client.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": config.OperatorName}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	sort.Strings(names)
	return names
}

// heldDrain is a NodeMaintenance whose drain lasts until the test lets the
// node's pods go: they get SIGTERM at eviction and stay until released.
type heldDrain struct {
	t         *testing.T
	c         *testcluster.Cluster
	node      *testcluster.RealNode
	name, ns  string
	signalDir string
	pods      []string
	start     time.Time
	before    *corev1.Node
}

// startWaitersOn starts n waiter pods on the real node, in a namespace and a
// signal directory of their own; held ones stay after SIGTERM until finish.
func startWaitersOn(t *testing.T, c *testcluster.Cluster, node *testcluster.RealNode, n int32, grace, exitDelay time.Duration, held bool) *heldDrain {
	t.Helper()
	h := &heldDrain{t: t, c: c, node: node, ns: c.Namespace(t)}
	h.signalDir = filepath.Join(node.HostDir, h.ns)
	if err := os.MkdirAll(h.signalDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range c.StartWaiters(t, h.ns, node.Name, h.signalDir, n, grace, exitDelay, held) {
		h.pods = append(h.pods, p.Name)
	}
	h.start = time.Now()
	return h
}

// startHeldDrain starts pods on the node that stay after SIGTERM until
// finish, creates a NodeMaintenance of the node with the API, and returns
// once every pod got SIGTERM: the drain is under way and cannot end alone.
func startHeldDrain(t *testing.T, c *testcluster.Cluster, node *testcluster.RealNode, name string, pods int32) *heldDrain {
	t.Helper()
	h := startWaitersOn(t, c, node, pods, 5*time.Minute, 0, true)
	h.name = name
	h.before = getNodeT(t, c, node.Name)
	h.start = time.Now()
	nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metaName(name), Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node.Name, Reason: "drain held across an operator upgrade"}}
	if err := c.Client.Create(context.Background(), nm); err != nil {
		t.Fatalf("create NodeMaintenance %s: %v", name, err)
	}
	testcluster.WaitFor(t, 2*time.Minute, "every pod on "+node.Name+" got SIGTERM", func(context.Context) (bool, error) {
		for _, p := range h.pods {
			if sigterms, _, err := readWaiterLog(h.signalDir, p); err != nil || len(sigterms) == 0 {
				return false, err
			}
		}
		return true, nil
	})
	return h
}

// stillDraining checks the maintenance is still Running with its pods
// pending: whatever happened meanwhile happened in the middle of the drain.
func (h *heldDrain) stillDraining() error {
	nm := &nmv1beta1.NodeMaintenance{}
	if err := h.c.Client.Get(context.Background(), client.ObjectKey{Name: h.name}, nm); err != nil {
		return err
	}
	if nm.Status.Phase != nmv1beta1.MaintenanceRunning || len(nm.Status.PendingPods) != len(h.pods) {
		return fmt.Errorf("NodeMaintenance %s: phase %s with pending pods %v, want Running with the %d held pods pending", h.name, nm.Status.Phase, nm.Status.PendingPods, len(h.pods))
	}
	return nil
}

// finish releases the pods, waits until the maintenance Succeeded with the
// right counts, checks every pod was evicted exactly once (audit log) and
// got SIGTERM once, then deletes the maintenance and checks the node is
// restored exactly.
func (h *heldDrain) finish() error {
	ctx := context.Background()
	testcluster.ReleaseWaiters(h.t, h.signalDir)
	deadline := time.Now().Add(2 * time.Minute)
	nm := &nmv1beta1.NodeMaintenance{}
	for {
		if err := h.c.Client.Get(ctx, client.ObjectKey{Name: h.name}, nm); err != nil {
			return err
		}
		if nm.Status.Phase == nmv1beta1.MaintenanceSucceeded {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("NodeMaintenance %s not Succeeded 2 minutes after its pods were let go: %+v", h.name, nm.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if s := nm.Status; s.TotalPods != len(h.pods) || s.EvictionPods != len(h.pods) || len(s.PendingPods) != 0 {
		return fmt.Errorf("NodeMaintenance %s Succeeded with %d pods, %d evicted, pending %v; want %d, all evicted", h.name, s.TotalPods, s.EvictionPods, s.PendingPods, len(h.pods))
	}
	accepted, _, err := h.c.Evictions(ctx, h.ns)
	if err != nil {
		return err
	}
	for _, p := range h.pods {
		if len(accepted[p]) != 1 {
			return fmt.Errorf("pod %s/%s was evicted %d times, want once (audit log: %v)", h.ns, p, len(accepted[p]), accepted)
		}
	}
	if err := waitersEndedGracefully(h.t, h.signalDir, h.pods, h.start, 5*time.Minute); err != nil {
		return err
	}
	if err := deleteMaintenancesAndWait(ctx, h.c, []string{h.name}); err != nil {
		return err
	}
	return nodeAsBefore(h.before, getNodeT(h.t, h.c, h.node.Name))
}

// operatorEvictedLast reads when each operator pod was evicted (audit log)
// and when the other pods on the node left (their own logs): every operator
// pod was evicted once, after the last of the others had exited.
func operatorEvictedLast(t *testing.T, c *testcluster.Cluster, ns string, others *heldDrain, replicas int) resource.TestCheckFunc {
	return func(*terraform.State) error {
		accepted, _, err := c.Evictions(context.Background(), ns)
		if err != nil {
			return err
		}
		if len(accepted) != replicas {
			return fmt.Errorf("%d operator pods were evicted, want the %d on the node: %v", len(accepted), replicas, accepted)
		}
		var lastExit time.Time
		for _, p := range others.pods {
			_, exit, err := readWaiterLog(others.signalDir, p)
			if err != nil {
				return err
			}
			if exit.After(lastExit) {
				lastExit = exit
			}
		}
		for pod, at := range accepted {
			if len(at) != 1 {
				return fmt.Errorf("operator pod %s was evicted %d times, want once", pod, len(at))
			}
			if !at[0].After(lastExit) {
				return fmt.Errorf("operator pod %s was evicted at %s, before the last other pod on the node exited (%s)", pod, at[0].Format(time.RFC3339Nano), lastExit.Format(time.RFC3339Nano))
			}
			t.Logf("operator pod %s evicted %s after the last other pod on the node exited", pod, at[0].Sub(lastExit).Round(time.Millisecond))
		}
		return nil
	}
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

// commitBeforeRollouts is the last commit of this repository before the
// NodeMaintenanceRollout API (#28): the operator an upgrade starts from.
// Move it forward only to the last commit before another API change.
const commitBeforeRollouts = "9f4acee1a22b0803e098760a0952bd90656ed6cb"

// buildOperatorImage runs what `make image` runs (hack/image) for the host
// platform, tagged ref (its tag is the version stamped into the binary),
// into a scratch directory, and returns the docker-archive.
func buildOperatorImage(t *testing.T, ref, commit string) string {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	start := time.Now()
	args := []string{"run", ".", "-repo", root, "-image", ref, "-out", out, "-platforms", "linux/amd64"}
	from := "the working tree"
	if commit != "" {
		args, from = append(args, "-commit", commit), "commit "+commit
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join(root, "hack", "image")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the operator image %s from %s (hack/image, as make image; a shallow clone lacks old commits: fetch the history): %v\n%s", ref, from, err, b)
	}
	archive := filepath.Join(out, "node-maintenance-operator-linux-amd64.docker.tar")
	if _, err := os.Stat(archive); err != nil {
		t.Fatal(err)
	}
	t.Logf("operator image %s built from %s in %s", ref, from, time.Since(start).Round(10*time.Millisecond))
	return archive
}

// operatorRunsOn checks that the operator runs as replicas pods of image on
// the real node, ready, never restarted, and that their processes really run
// as 65532:65532 with a read-only root filesystem and the webhook
// certificates the kubelet mounted.
func operatorRunsOn(c *testcluster.Cluster, ns string, n *testcluster.RealNode, image string, replicas int) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		pods := &corev1.PodList{}
		if err := c.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": config.OperatorName}); err != nil {
			return err
		}
		if len(pods.Items) != replicas {
			return fmt.Errorf("%d operator pods, want %d", len(pods.Items), replicas)
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != n.Name {
				return fmt.Errorf("operator pod %s is on %q, not on the real node %s", p.Name, p.Spec.NodeName, n.Name)
			}
			if img := p.Spec.Containers[0].Image; img != image {
				return fmt.Errorf("operator pod %s runs image %s, want %s", p.Name, img, image)
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

// waitersEndedGracefully reads each waiter's file: it got SIGTERM once, after
// the maintenance began, and exited by itself within its grace period.
func waitersEndedGracefully(t *testing.T, signalDir string, pods []string, maintStart time.Time, grace time.Duration) error {
	for _, p := range pods {
		sigterms, exit, err := readWaiterLog(signalDir, p)
		if err != nil {
			return err
		}
		if len(sigterms) != 1 || exit.IsZero() {
			return fmt.Errorf("waiter pod %s logged %d SIGTERMs and exit %v, want one SIGTERM and its exit", p, len(sigterms), exit)
		}
		sigterm := sigterms[0]
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

// readWaiterLog reads what waiter pod wrote to its file in signalDir: when
// it got SIGTERM (each time) and when it exited (zero while it runs).
func readWaiterLog(signalDir, pod string) (sigterms []time.Time, exit time.Time, err error) {
	b, err := os.ReadFile(filepath.Join(signalDir, pod))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("waiter pod %s left no signal log: %w", pod, err)
	}
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
			sigterms = append(sigterms, at)
		case strings.Contains(msg, "exiting after"):
			exit = at
		}
	}
	return sigterms, exit, nil
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
