package pulumi_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
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
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	nmpulumi "github.com/nodemaintenance/terraform-provider-nodemaintenance/pulumi"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/pulumi/sdk/go/nodemaintenance"
)

// A Go program that uses the generated Go SDK, run in this process by the
// Automation API (an inline program: no language host), with the pinned CLI,
// the bridged provider under test and a local state directory. up drains the
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
	// A taint and a label of someone else's, so that "restored exactly" means
	// more than "uncordoned".
	n := getNode(t, c, node)
	orig := n.DeepCopy()
	n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "example.com/foreign", Value: "x", Effect: corev1.TaintEffectPreferNoSchedule})
	n.Labels["example.com/team"] = "storage"
	if err := c.Client.Patch(context.Background(), n, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	before := settledStateOf(t, c, node)

	program := func(ctx *pulumi.Context) error {
		nm, err := nodemaintenance.NewNodeMaintenance(ctx, "maintenance", &nodemaintenance.NodeMaintenanceArgs{
			NodeName: pulumi.String(node),
			Reason:   pulumi.String("kernel upgrade (Automation API)"),
			Timeouts: &nodemaintenance.NodeMaintenanceTimeoutsArgs{
				Create: pulumi.String("2m"),
				Delete: pulumi.String("2m"),
			},
		})
		if err != nil {
			return err
		}
		ctx.Export("name", nm.Name)
		ctx.Export("phase", nm.Phase)
		return nil
	}
	stack := newAutomationStack(t, c, program)

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
	n = getNode(t, c, node)
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

// newAutomationStack makes a stack of program in a fresh local workspace: the
// pinned CLI, state in a directory, its own Pulumi home, the provider plugin
// under test named by path (nothing is downloaded), the cluster's kubeconfig
// in the stack's provider configuration. The stack is destroyed at cleanup, so
// a failed test leaves no node in maintenance.
func newAutomationStack(t *testing.T, c *testcluster.Cluster, program pulumi.RunFunc) auto.Stack {
	t.Helper()
	ctx := context.Background()
	tmp := t.TempDir()
	cli, err := auto.NewPulumiCommand(&auto.PulumiCommandOptions{Root: filepath.Dir(testcluster.ToolsBinDir())})
	if err != nil {
		t.Fatalf("the pinned Pulumi CLI (make tools builds it): %v", err)
	}
	project := workspace.Project{
		Name:    "nodemaintenance-automation",
		Runtime: workspace.NewProjectRuntimeInfo("go", nil),
		Backend: &workspace.ProjectBackend{URL: "file://" + filepath.Join(tmp, "state")},
		Plugins: &workspace.Plugins{Providers: []workspace.PluginOptions{{Name: nmpulumi.Name, Path: providerDir}}},
	}
	for _, dir := range []string{filepath.Join(tmp, "state"), filepath.Join(tmp, "work")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stack, err := auto.UpsertStackInlineSource(ctx, "test", string(project.Name), program,
		auto.Pulumi(cli),
		auto.Project(project),
		auto.WorkDir(filepath.Join(tmp, "work")),
		auto.PulumiHome(filepath.Join(tmp, "pulumi-home")),
		auto.SecretsProvider("passphrase"),
		auto.EnvVars(map[string]string{
			"PULUMI_CONFIG_PASSPHRASE":                    "test",
			"PULUMI_SKIP_UPDATE_CHECK":                    "1",
			"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
		}),
	)
	if err != nil {
		t.Fatalf("create the stack: %v", err)
	}
	if err := stack.SetConfig(ctx, nmpulumi.Name+":configPath", auto.ConfigValue{Value: c.KubeconfigPath}); err != nil {
		t.Fatalf("set the provider's configPath: %v", err)
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
