package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testoperator"
)

// providerDirEnv names a directory holding a built pulumi-resource-nodemaintenance
// (`make test-pulumi` sets it). Unset, the test builds the plugin itself.
const providerDirEnv = "NM_PULUMI_PROVIDER_DIR"

const (
	providerBinary = "pulumi-resource-nodemaintenance"
	drainTaint     = "medik8s.io/drain"
	pulumiTimeout  = 5 * time.Minute
)

var (
	operator *testoperator.Operator
	// providerDir holds the plugin under test, set by TestMain.
	providerDir string
)

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Options{InstallCRD: true, Setup: func(c *testcluster.Cluster) error {
		if err := testcluster.RequireTools("pulumi"); err != nil {
			return fmt.Errorf("%w (or: hack/tools.sh pulumi)", err)
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

// bridgedProvider returns the directory of the plugin: the one named by
// NM_PULUMI_PROVIDER_DIR, or a fresh build of this checkout's pulumi/ module.
func bridgedProvider() (string, error) {
	if dir := os.Getenv(providerDirEnv); dir != "" {
		dir, err := filepath.Abs(dir)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(filepath.Join(dir, providerBinary)); err != nil {
			return "", fmt.Errorf("%s=%s: %w (make pulumi-provider builds it)", providerDirEnv, dir, err)
		}
		return dir, nil
	}
	root, err := testcluster.RepoRoot() // examples/pulumi-go
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "nm-pulumi-provider-")
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "build", "-o", dir, "./cmd/"+providerBinary)
	cmd.Dir = filepath.Join(root, "..", "..", "pulumi")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.Join(fmt.Errorf("build the Pulumi plugin: %w\n%s", err, out), os.RemoveAll(dir))
	}
	return dir, nil
}

// The example's program, on the generated Go SDK, run in this process by the
// Automation API (an inline program: no language host), with the pinned CLI,
// the bridged plugin under test and a local state directory. up drains the
// node and reports Succeeded, refresh finds the stack as the cluster has it,
// destroy gives the node back exactly as it was.
func TestAutomationAPIGoSDK(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	c.CreateDeployment(t, ns, "web", 2, pool.Selector())
	c.WaitRunningPods(t, ns, "web", node, 2)
	pool.AddNode(t, "") // where the evicted pods go
	addForeignTaintAndLabel(t, c, node)
	before := settledStateOf(t, c, node)

	m := Maintenance{Node: node, Reason: "kernel upgrade (Automation API)", Create: "2m", Delete: "2m"}
	stack := newStack(t, c, m.Program)

	ctx, cancel := context.WithTimeout(context.Background(), 3*pulumiTimeout)
	defer cancel()
	var out bytes.Buffer
	logged := func(op string, start time.Time) {
		t.Helper()
		t.Logf("%s (%s):\n%s", op, time.Since(start).Round(100*time.Millisecond), out.String())
		out.Reset()
	}

	start := time.Now()
	up, err := stack.Up(ctx, optup.ProgressStreams(&out))
	logged("up", start)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	if phase := up.Outputs["phase"].Value; phase != "Succeeded" {
		t.Errorf("up exported phase %v, want Succeeded", phase)
	}
	name, _ := up.Outputs["name"].Value.(string)
	if want := "maintain-" + node; name != want {
		t.Errorf("up exported name %q, want %q", name, want)
	}
	var nm nmv1beta1.NodeMaintenance
	if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &nm); err != nil {
		t.Fatalf("the NodeMaintenance the program created: %v", err)
	}
	if nm.Spec.NodeName != node || nm.Status.Phase != nmv1beta1.MaintenanceSucceeded {
		t.Errorf("NodeMaintenance %s: node %q phase %q, want node %q phase %q", name, nm.Spec.NodeName, nm.Status.Phase, node, nmv1beta1.MaintenanceSucceeded)
	}
	n := getNode(t, c, node)
	if !n.Spec.Unschedulable {
		t.Errorf("node %s is not cordoned after up", node)
	}
	if !hasTaint(n, drainTaint) {
		t.Errorf("node %s has no %s taint after up: %v", node, drainTaint, n.Spec.Taints)
	}
	assertDrained(t, c, ns, node)
	assertNoPluginLeft(t)

	start = time.Now()
	refresh, err := stack.Refresh(ctx, optrefresh.ExpectNoChanges(), optrefresh.ProgressStreams(&out))
	logged("refresh", start)
	if err != nil {
		t.Fatalf("refresh found changes or failed: %v", err)
	}
	if changed := changes(refresh.Summary.ResourceChanges); len(changed) > 0 {
		t.Errorf("refresh changed the stack: %v", changed)
	}
	start = time.Now()
	preview, err := stack.Preview(ctx, optpreview.ExpectNoChanges(), optpreview.ProgressStreams(&out))
	logged("preview", start)
	if err != nil {
		t.Fatalf("preview after refresh found changes or failed: %v", err)
	}
	if changed := changes(ptrTo(opsToStrings(preview.ChangeSummary))); len(changed) > 0 {
		t.Errorf("preview after refresh would change the stack: %v", changed)
	}
	assertNoPluginLeft(t)

	start = time.Now()
	_, err = stack.Destroy(ctx, optdestroy.ProgressStreams(&out))
	logged("destroy", start)
	if err != nil {
		t.Fatalf("destroy: %v", err)
	}
	if after := stateOf(getNode(t, c, node)); !reflect.DeepEqual(before, after) {
		t.Errorf("node %s is not restored exactly after destroy:\nbefore %+v\nafter  %+v", node, before, after)
	}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &nmv1beta1.NodeMaintenance{}); !apierrors.IsNotFound(err) {
		t.Errorf("NodeMaintenance %s should be gone after destroy, got %v", name, err)
	}
	assertNoPluginLeft(t)
}

// newStack makes the example's stack of program in a fresh workspace: the pinned
// CLI, state in a temporary directory, its own Pulumi home, the plugin under
// test, the test cluster's kubeconfig. The stack is destroyed at cleanup, so
// a failed test leaves no node in maintenance.
func newStack(t *testing.T, c *testcluster.Cluster, program pulumi.RunFunc) auto.Stack {
	t.Helper()
	tmp := t.TempDir()
	w := Workspace{
		PulumiRoot: filepath.Dir(testcluster.ToolsBinDir()),
		PluginDir:  providerDir,
		StateDir:   filepath.Join(tmp, "state"),
		Kubeconfig: c.KubeconfigPath,
		WorkDir:    filepath.Join(tmp, "work"),
		PulumiHome: filepath.Join(tmp, "pulumi-home"),
		Env: map[string]string{
			"PULUMI_CONFIG_PASSPHRASE":                    "test",
			"PULUMI_SKIP_UPDATE_CHECK":                    "1",
			"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
		},
	}
	if err := os.MkdirAll(w.WorkDir, 0o755); err != nil {
		t.Fatal(err)
	}
	stack, err := Stack(context.Background(), "test", program, w)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), pulumiTimeout)
		defer cancel()
		var out bytes.Buffer
		if _, err := stack.Destroy(ctx, optdestroy.ProgressStreams(&out)); err != nil {
			t.Logf("cleanup: destroy: %v\n%s", err, out.String())
		}
	})
	return stack
}

// changes lists the operations of an update summary other than "same".
func changes(summary *map[string]int) []string {
	if summary == nil {
		return nil
	}
	var ops []string
	for _, op := range slices.Sorted(maps.Keys(*summary)) {
		if n := (*summary)[op]; op != "same" && n > 0 {
			ops = append(ops, fmt.Sprintf("%s: %d", op, n))
		}
	}
	return ops
}

func opsToStrings[K ~string](m map[K]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[string(k)] = v
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

// addForeignTaintAndLabel gives node a taint and a label of someone else's,
// so that "restored exactly" means more than "uncordoned".
func addForeignTaintAndLabel(t *testing.T, c *testcluster.Cluster, node string) {
	t.Helper()
	n := getNode(t, c, node)
	orig := n.DeepCopy()
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "example.com/foreign", Value: "x", Effect: corev1.TaintEffectPreferNoSchedule})
	n.Labels["example.com/team"] = "storage"
	if err := c.Client.Patch(context.Background(), n, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

// nodeState is what a maintenance changes on a node and must give back.
type nodeState struct {
	Unschedulable bool
	Taints        []corev1.Taint
	Labels        map[string]string
	Annotations   map[string]string
}

func stateOf(n *corev1.Node) nodeState {
	return nodeState{n.Spec.Unschedulable, n.Spec.Taints, n.Labels, n.Annotations}
}

// settledStateOf waits until kwok and the node controller are done with a
// new node (no node.kubernetes.io/ taint left, the kubelet's beta labels
// set), then takes its state: the baseline a restore is compared with.
func settledStateOf(t *testing.T, c *testcluster.Cluster, node string) nodeState {
	t.Helper()
	testcluster.WaitFor(t, time.Minute, "node "+node+" to settle", func(context.Context) (bool, error) {
		n := getNode(t, c, node)
		_, beta := n.Labels["beta.kubernetes.io/arch"]
		return beta && !slices.ContainsFunc(n.Spec.Taints, func(taint corev1.Taint) bool {
			return strings.HasPrefix(taint.Key, "node.kubernetes.io/")
		}), nil
	})
	return stateOf(getNode(t, c, node))
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
	return slices.ContainsFunc(n.Spec.Taints, func(taint corev1.Taint) bool {
		return taint.Key == key && taint.Effect == corev1.TaintEffectNoSchedule
	})
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
			t.Errorf("pod %s/%s is still on %s after up", pod.Namespace, pod.Name, node)
		}
	}
}

// assertNoPluginLeft fails when a provider plugin the engine started is
// still running once the operation has returned.
func assertNoPluginLeft(t *testing.T) {
	t.Helper()
	// The whole program name, as the engine starts it: not, say, the test
	// cluster's processes, whose paths may contain it.
	const pattern = `(^|/)pulumi-resource-[^ /]+( |$)`
	var pids string
	// The engine stops its plugins as it exits; give them a moment.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, err := exec.Command("pgrep", "-f", pattern).Output()
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 1 {
			return // pgrep: no process matched
		}
		if err != nil {
			t.Fatalf("pgrep -f %s: %v", pattern, err)
		}
		pids = strings.Join(strings.Fields(string(out)), " ")
		if time.Now().After(deadline) {
			break
		}
	}
	t.Errorf("processes matching %s are still running after the operation returned: pids %s", pattern, pids)
}
