package pulumi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testoperator"
	nmpulumi "github.com/nodemaintenance/terraform-provider-nodemaintenance/pulumi"
)

// providerDirEnv names a directory holding a built pulumi-resource-nodemaintenance
// (`make test-pulumi` sets it). Unset, the test builds the provider itself.
const providerDirEnv = "NM_PULUMI_PROVIDER_DIR"

const (
	providerBinary = "pulumi-resource-" + nmpulumi.Name
	// examplePluginPath is the committed, relative plugins.providers[].path
	// of the example; the test points it at the provider under test.
	examplePluginPath = "path: ../../bin/pulumi"
	drainTaint        = "medik8s.io/drain"
	pulumiTimeout     = 5 * time.Minute
)

var (
	operator *testoperator.Operator
	// providerDir holds the provider binary under test, set by TestMain.
	providerDir string
)

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Options{InstallCRD: true, Setup: func(c *testcluster.Cluster) error {
		if err := testcluster.RequireTools("pulumi", "pulumi-language-yaml"); err != nil {
			return fmt.Errorf("%w (or: hack/tools.sh pulumi pulumi-language-yaml)", err)
		}
		dir, err := bridgedProvider()
		if err != nil {
			return err
		}
		providerDir = dir
		operator, err = testoperator.Start(c, testoperator.DefaultOptions())
		return err
	}, Teardown: func() {
		operator.Stop()
		if os.Getenv(providerDirEnv) == "" && providerDir != "" {
			_ = os.RemoveAll(providerDir) // our own build
		}
	}}))
}

// bridgedProvider returns the directory of the provider binary: the one named
// by NM_PULUMI_PROVIDER_DIR, or a fresh build of this checkout.
func bridgedProvider() (string, error) {
	if dir := os.Getenv(providerDirEnv); dir != "" {
		dir, err := filepath.Abs(dir)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(filepath.Join(dir, providerBinary)); err != nil {
			return "", fmt.Errorf("%s=%s: %w (make test-pulumi builds it)", providerDirEnv, dir, err)
		}
		return dir, nil
	}
	dir, err := os.MkdirTemp("", "nm-pulumi-provider-")
	if err != nil {
		return "", err
	}
	return dir, testcluster.Build("./cmd/"+providerBinary, dir)
}

// The example program, end to end: up drains node02 and exports the phase,
// a second up changes nothing, destroy restores the node.
func TestPulumiExampleUpPreviewDestroy(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "node02").Name
	c.CreateDeployment(t, ns, "web", 2, pool.Selector())
	c.WaitRunningPods(t, ns, "web", node, 2)
	pool.AddNode(t, "") // where the evicted pods go

	p := newProject(t, c)
	p.mustRun(t, "up", "--yes", "--skip-preview")
	if phase := strings.TrimSpace(p.mustRun(t, "stack", "output", "phase")); phase != "Succeeded" {
		t.Fatalf("exported phase is %q, want Succeeded", phase)
	}
	n := getNode(t, c, node)
	if !n.Spec.Unschedulable {
		t.Errorf("node %s is not cordoned after pulumi up", node)
	}
	if !hasTaint(n, drainTaint) {
		t.Errorf("node %s has no %s taint after pulumi up: %v", node, drainTaint, n.Spec.Taints)
	}
	assertDrained(t, c, ns, node)
	if types := p.resourceTypes(t); !slices.ContainsFunc(types, isNodeMaintenance) {
		t.Errorf("the NodeMaintenance is not in the stack state: %v", types)
	}
	assertNoPluginLeft(t)

	// The same program again, state refreshed from the cluster: nothing to do.
	p.mustRun(t, "up", "--yes", "--skip-preview", "--refresh", "--expect-no-changes")
	assertNoPluginLeft(t)

	p.mustRun(t, "destroy", "--yes", "--skip-preview")
	n = getNode(t, c, node)
	if n.Spec.Unschedulable || hasTaint(n, drainTaint) {
		t.Errorf("node %s is not restored after pulumi destroy: unschedulable=%v taints=%v", node, n.Spec.Unschedulable, n.Spec.Taints)
	}
	err := c.Client.Get(context.Background(), client.ObjectKey{Name: "maintain-" + node}, &nmv1beta1.NodeMaintenance{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("NodeMaintenance maintain-%s should be gone after pulumi destroy, got %v", node, err)
	}
	assertNoPluginLeft(t)
}

// The webhook's refusal reaches the Pulumi user verbatim, and nothing is
// created or recorded.
func TestPulumiUnknownNodeIsRefused(t *testing.T) {
	c := testcluster.Get(t)
	p := newProject(t, c)
	p.mustRun(t, "config", "set", "nodeName", "no-such-node")
	out, err := p.run(t, "up", "--yes", "--skip-preview")
	if err == nil {
		t.Fatalf("pulumi up succeeded for a node that does not exist:\n%s", out)
	}
	if want := `node "no-such-node" does not exist`; !strings.Contains(out, want) {
		t.Errorf("pulumi up output lacks the webhook's message %q:\n%s", want, out)
	}
	if types := p.resourceTypes(t); slices.ContainsFunc(types, isNodeMaintenance) {
		t.Errorf("the refused NodeMaintenance is in the stack state: %v", types)
	}
	err = c.Client.Get(context.Background(), client.ObjectKey{Name: "maintain-no-such-node"}, &nmv1beta1.NodeMaintenance{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("NodeMaintenance maintain-no-such-node should not exist, got %v", err)
	}
	assertNoPluginLeft(t)
}

// A drain that cannot finish in the create timeout fails `pulumi up` with the
// provider's message, naming the pod and the PodDisruptionBudget that block,
// as under Terraform. The bridge does not keep a failed create in the stack,
// so the NodeMaintenance stays in the cluster (the node stays cordoned, never
// silently restored); the documented way out, `pulumi import` then
// `pulumi destroy`, restores the node.
func TestPulumiDrainTimeoutIsAnError(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	c.CreateDeployment(t, ns, "stuck", 2, pool.Selector())
	c.WaitRunningPods(t, ns, "stuck", node, 2)
	c.CreatePDB(t, ns, "stuck", ptr.To(intstr.FromInt32(2)), nil)
	pool.AddNode(t, "")

	p := newProject(t, c)
	p.mustRun(t, "config", "set", "nodeName", node)
	p.mustRun(t, "config", "set", "drainTimeout", "5s")
	out, err := p.run(t, "up", "--yes", "--skip-preview")
	if err == nil {
		t.Fatalf("pulumi up succeeded although the PodDisruptionBudget never allows an eviction:\n%s", out)
	}
	for _, want := range []string{"Timed Out Waiting for the Node to Drain", "Still pending: " + ns + "/stuck-", "disruption budget stuck"} {
		if !strings.Contains(out, want) {
			t.Errorf("pulumi up output lacks %q:\n%s", want, out)
		}
	}
	name := "maintain-" + node
	if err := c.Client.Get(context.Background(), client.ObjectKey{Name: name}, &nmv1beta1.NodeMaintenance{}); err != nil {
		t.Fatalf("NodeMaintenance %s should stay in the cluster after the timeout: %v", name, err)
	}
	if n := getNode(t, c, node); !n.Spec.Unschedulable {
		t.Errorf("node %s is not cordoned while its maintenance still runs", node)
	}
	assertNoPluginLeft(t)

	// The recovery the provider's docs give: adopt it, then destroy.
	p.mustRun(t, "import", "--yes", "--protect=false", string(nmpulumi.NodeMaintenanceToken), "node02", name)
	p.mustRun(t, "destroy", "--yes", "--skip-preview")
	n := getNode(t, c, node)
	if n.Spec.Unschedulable || hasTaint(n, drainTaint) {
		t.Errorf("node %s is not restored after import and destroy: unschedulable=%v taints=%v", node, n.Spec.Unschedulable, n.Spec.Taints)
	}
	err = c.Client.Get(context.Background(), client.ObjectKey{Name: name}, &nmv1beta1.NodeMaintenance{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("NodeMaintenance %s should be gone after destroy, got %v", name, err)
	}
	assertNoPluginLeft(t)
}

// project is a copy of examples/pulumi with its own stack, file backend and
// Pulumi home, run by the pinned CLI and YAML language host only.
type project struct {
	dir string
	env []string
}

func newProject(t *testing.T, c *testcluster.Cluster) *project {
	t.Helper()
	root, err := testcluster.RepoRoot() // pulumi/, the nested module
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join(root, "..", "examples", "pulumi", "Pulumi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(example, []byte(examplePluginPath)) {
		t.Fatalf("examples/pulumi/Pulumi.yaml no longer says %q; update the test", examplePluginPath)
	}
	tmp := t.TempDir()
	p := &project{dir: filepath.Join(tmp, "project")}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	program := bytes.Replace(example, []byte(examplePluginPath), []byte("path: "+providerDir), 1)
	if err := os.WriteFile(filepath.Join(p.dir, "Pulumi.yaml"), program, 0o644); err != nil {
		t.Fatal(err)
	}
	// A fixed environment: nothing from the caller's shell (KUBE_*, PULUMI_*)
	// changes what the CLI or the provider does, and only the pinned tools are
	// on PATH.
	p.env = []string{
		"PATH=" + testcluster.ToolsBinDir(),
		"HOME=" + filepath.Join(tmp, "home"),
		"PULUMI_HOME=" + filepath.Join(tmp, "pulumi-home"),
		"PULUMI_CONFIG_PASSPHRASE=test",
		"PULUMI_SKIP_UPDATE_CHECK=1",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true",
		"KUBECONFIG=" + c.KubeconfigPath,
	}
	state := filepath.Join(tmp, "state")
	for _, dir := range []string{state, filepath.Join(tmp, "home")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p.mustRun(t, "login", "file://"+state)
	p.mustRun(t, "stack", "init", "test")
	t.Cleanup(func() {
		// A failed test must not leave node02 in maintenance for the next one.
		if out, err := p.run(t, "destroy", "--yes", "--skip-preview"); err != nil {
			t.Logf("cleanup: pulumi destroy: %v\n%s", err, out)
		}
	})
	return p
}

// run runs the pinned pulumi CLI in the project and returns its combined output.
func (p *project) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	pulumi, err := testcluster.Tool("pulumi")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pulumiTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, pulumi, append(args, "--non-interactive", "--color=never")...)
	cmd.Dir, cmd.Env = p.dir, p.env
	// On timeout the whole process group goes: the CLI, the language host
	// and the provider plugin.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	// Shown with -v or when the test fails.
	t.Logf("pulumi %s (%s):\n%s", strings.Join(args, " "), time.Since(start).Round(100*time.Millisecond), out.String())
	if ctx.Err() != nil {
		err = errors.Join(err, fmt.Errorf("pulumi %s timed out after %s", args[0], pulumiTimeout))
	}
	return out.String(), err
}

func (p *project) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := p.run(t, args...)
	if err != nil {
		t.Fatalf("pulumi %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// resourceTypes lists the type of every resource in the stack's state.
func (p *project) resourceTypes(t *testing.T) []string {
	t.Helper()
	var export struct {
		Deployment struct {
			Resources []struct {
				Type string `json:"type"`
			} `json:"resources"`
		} `json:"deployment"`
	}
	out := p.mustRun(t, "stack", "export")
	if err := json.Unmarshal([]byte(out), &export); err != nil {
		t.Fatalf("pulumi stack export: %v\n%s", err, out)
	}
	var types []string
	for _, r := range export.Deployment.Resources {
		types = append(types, r.Type)
	}
	return types
}

// isNodeMaintenance matches the type token of the NodeMaintenance resource.
func isNodeMaintenance(token string) bool { return token == string(nmpulumi.NodeMaintenanceToken) }

// assertNoPluginLeft fails when a provider plugin or language host the engine
// started is still running once the CLI has returned.
func assertNoPluginLeft(t *testing.T) {
	t.Helper()
	// Whole program names only, as the engine starts them (the absolute path
	// and the address of the engine): not, say, the test cluster's processes,
	// whose paths contain this package's name.
	for _, pattern := range []string{`(^|/)pulumi-resource-[^ /]+( |$)`, `(^|/)pulumi-language-yaml( |$)`} {
		var pids string
		// The engine stops its plugins as it exits; give them a moment.
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			out, err := exec.Command("pgrep", "-f", pattern).Output()
			var exit *exec.ExitError
			if errors.As(err, &exit) && exit.ExitCode() == 1 {
				pids = "" // pgrep: no process matched
				break
			}
			if err != nil {
				t.Fatalf("pgrep -f %s: %v", pattern, err)
			}
			pids = strings.Join(strings.Fields(string(out)), " ")
			if time.Now().After(deadline) {
				break
			}
		}
		if pids != "" {
			t.Errorf("processes matching %s are still running after pulumi exited: pids %s", pattern, pids)
		}
	}
}

func getNode(t *testing.T, c *testcluster.Cluster, name string) *corev1.Node {
	t.Helper()
	n := &corev1.Node{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Name: name}, n); err != nil {
		t.Fatal(err)
	}
	return n
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, taint := range n.Spec.Taints {
		if taint.Key == key && taint.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}

// assertDrained checks that no pod of the test's namespace is left on node.
func assertDrained(t *testing.T, c *testcluster.Cluster, ns, node string) {
	t.Helper()
	pods, err := c.PodsOnNode(context.Background(), node)
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods {
		if pod.Namespace == ns {
			t.Errorf("pod %s/%s is still on %s after pulumi up", pod.Namespace, pod.Name, node)
		}
	}
}
