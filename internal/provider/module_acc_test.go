package provider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// The module of examples/modules/node-maintenance, run as a user runs it
// (terraform-plugin-testing does not take modules, so the test drives the CLI:
// get, apply, output, destroy, with the provider binary built from this
// checkout through dev_overrides). One configuration installs the operator
// and maintains the nodes of a variable, its outputs gate on the phases, and
// one destroy restores the nodes and then removes the operator. kwok runs the
// operator's pods as fakes, so the module installs it in webhook_url mode and
// the real operator runs here with the installed ServiceAccount's token,
// started between the install and the maintenance.
func TestAccModuleInstallsOperatorAndMaintainsNodes(t *testing.T) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	module := filepath.Join(root, "examples", "modules", "node-maintenance")
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		stepAsideForInstallation(t, c)
		w := newLocalWebhook(t)
		ns := testcluster.UniqueName(t, "nmo-mod")
		pool := c.NewPool(t)
		nodes := []string{pool.AddNode(t, "").Name, pool.AddNode(t, "").Name}
		podNS := c.Namespace(t)
		c.CreateDeployment(t, podNS, "mod", 4, pool.Selector())
		pool.AddNode(t, "") // where the evicted pods go

		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(providerBlock(c)+fmt.Sprintf(`
terraform {
  required_providers {
    nodemaintenance = {
      source = "nodemaintenance/nodemaintenance"
    }
  }
}

variable "nodes" {
  type = map(string)
}

module "maintenance" {
  source = %q

  nodes              = var.nodes
  operator_namespace = %q
  operator_replicas  = 0
  webhook_url        = "https://127.0.0.1:%d"
  webhook_ca_bundle  = file(%q)
}

output "phases" {
  value = module.maintenance.phases
}

output "all_succeeded" {
  value = module.maintenance.all_succeeded
}
`, module, ns, w.port, w.caFile)), 0o644); err != nil {
			t.Fatal(err)
		}
		tf := newCLIRun(t, dir)
		nodesVar := func(names ...string) string {
			m := map[string]string{}
			for _, n := range names {
				m[n] = "module test"
			}
			b, _ := json.Marshal(m)
			return "nodes=" + string(b)
		}
		destroyed, stop := false, func() {}
		t.Cleanup(func() {
			// A failed test must not leave the installation's webhook behind;
			// the operator stays until the NodeMaintenances are gone.
			if !destroyed {
				_, _ = tf.run(t, "destroy", "-auto-approve", "-var", nodesVar())
			}
			stop()
		})

		tf.mustRun(t, "get")
		// The installation alone: no node yet.
		tf.mustRun(t, "apply", "-auto-approve", "-var", nodesVar())
		if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: config.OperatorName}, &appsv1.Deployment{}); err != nil {
			t.Fatalf("the module's apply did not install the operator Deployment: %v", err)
		}
		// No node is not success, as for the nodemaintenance_list data source.
		tf.wantOutputs(t, map[string]any{"all_succeeded": false, "phases": map[string]any{}})
		if _, stop, err = startAsServiceAccount(c, ns, w); err != nil {
			t.Fatal(err)
		}

		// Two nodes, drained by the operator the module installed.
		tf.mustRun(t, "apply", "-auto-approve", "-var", nodesVar(nodes...))
		tf.wantOutputs(t, map[string]any{"all_succeeded": true,
			"phases": map[string]any{nodes[0]: "Succeeded", nodes[1]: "Succeeded"}})
		for _, n := range nodes {
			if err := nodeCheck(c, n, cordoned)(nil); err != nil {
				t.Error(err)
			}
		}
		// The same configuration again: nothing to do.
		tf.mustRun(t, "plan", "-detailed-exitcode", "-var", nodesVar(nodes...))

		// One node back to work; the other stays in maintenance.
		tf.mustRun(t, "apply", "-auto-approve", "-var", nodesVar(nodes[1]))
		tf.wantOutputs(t, map[string]any{"all_succeeded": true, "phases": map[string]any{nodes[1]: "Succeeded"}})
		if err := nodeCheck(c, nodes[0], schedulable)(nil); err != nil {
			t.Error(err)
		}
		if err := nodeCheck(c, nodes[1], cordoned)(nil); err != nil {
			t.Error(err)
		}

		// One destroy: the node is restored, then the operator removed.
		tf.mustRun(t, "destroy", "-auto-approve", "-var", nodesVar(nodes[1]))
		destroyed = true
		ctx := context.Background()
		for _, n := range nodes {
			if err := nodeCheck(c, n, schedulable)(nil); err != nil {
				t.Error(err)
			}
		}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: "maintain-" + nodes[1]}, &nmv1beta1.NodeMaintenance{}); err == nil {
			t.Errorf("NodeMaintenance maintain-%s is left after destroy", nodes[1])
		}
		testcluster.WaitFor(t, time.Minute, "the operator namespace "+ns+" to go", func(ctx context.Context) (bool, error) {
			err := c.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
	})
}

var (
	providerBinaryOnce sync.Once
	providerBinaryDir  string
	providerBinaryErr  error
)

// providerBinary builds the provider from this checkout once per test binary
// and returns the directory that holds it.
func providerBinary(t *testing.T) string {
	t.Helper()
	providerBinaryOnce.Do(func() {
		if providerBinaryDir, providerBinaryErr = os.MkdirTemp("", "nm-provider-bin-"); providerBinaryErr == nil {
			providerBinaryErr = testcluster.Build(".", filepath.Join(providerBinaryDir, "terraform-provider-nodemaintenance"))
		}
	})
	if providerBinaryErr != nil {
		t.Fatal(providerBinaryErr)
	}
	return providerBinaryDir
}

// cliRun runs the CLI under test (TF_ACC_TERRAFORM_PATH, set by eachCLI) in
// dir, with the provider built from this checkout through dev_overrides.
type cliRun struct {
	cli, dir string
	env      []string
}

func newCLIRun(t *testing.T, dir string) *cliRun {
	t.Helper()
	bin := providerBinary(t)
	rc := filepath.Join(t.TempDir(), "cli.tfrc")
	if err := testcluster.WriteDevOverrides(rc, bin); err != nil {
		t.Fatal(err)
	}
	return &cliRun{cli: os.Getenv("TF_ACC_TERRAFORM_PATH"), dir: dir, env: append(os.Environ(),
		"TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1")}
}

func (r *cliRun) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.cli, append(args[:1:1], append([]string{"-no-color"}, args[1:]...)...)...)
	cmd.Dir, cmd.Env = r.dir, r.env
	out, err := cmd.CombinedOutput()
	t.Logf("%s %s:\n%s", filepath.Base(r.cli), strings.Join(args, " "), out)
	return string(out), err
}

func (r *cliRun) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := r.run(t, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(r.cli), strings.Join(args, " "), err, out)
	}
	return out
}

// wantOutputs compares root module outputs with want.
func (r *cliRun) wantOutputs(t *testing.T, want map[string]any) {
	t.Helper()
	var outputs map[string]struct {
		Value any `json:"value"`
	}
	out := r.mustRun(t, "output", "-json")
	if err := json.Unmarshal([]byte(out), &outputs); err != nil {
		t.Fatalf("output -json: %v\n%s", err, out)
	}
	for name, w := range want {
		got, _ := json.Marshal(outputs[name].Value)
		wantJSON, _ := json.Marshal(w)
		if string(got) != string(wantJSON) {
			t.Errorf("output %s = %s, want %s", name, got, wantJSON)
		}
	}
}
