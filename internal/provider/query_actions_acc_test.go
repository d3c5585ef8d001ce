package provider_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// `terraform query` and actions are Terraform 1.14+ features that OpenTofu
// does not have: these tests run on the pinned Terraform only, through its
// CLI as a user runs it.
func onTerraform(t *testing.T, body func(t *testing.T, c *testcluster.Cluster, r func(dir string) *cliRun)) {
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		if filepath.Base(os.Getenv("TF_ACC_TERRAFORM_PATH")) != "terraform" {
			t.Skip("OpenTofu has no list resources or actions; this runs on Terraform")
		}
		body(t, c, func(dir string) *cliRun { return newCLIRun(t, dir) })
	})
}

// NodeMaintenances made with kubectl are found by `terraform query`, which
// writes a resource and an import block for each; applying those imports them,
// and the next plan has nothing to do.
func TestAccQueryFindsAndImportsMaintenances(t *testing.T) {
	onTerraform(t, func(t *testing.T, c *testcluster.Cluster, newRun func(string) *cliRun) {
		ctx := context.Background()
		pool := c.NewPool(t)
		a, b, other := pool.AddNode(t, "").Name, pool.AddNode(t, "").Name, pool.AddNode(t, "").Name
		pool.AddNode(t, "") // room for what the drains move
		ns := c.Namespace(t)
		c.CreateDeployment(t, ns, "query", 3, pool.Selector())
		label := testcluster.UniqueName(t, "q")
		manifest := filepath.Join(t.TempDir(), "nm.yaml")
		var docs []string
		for _, n := range []struct{ node, extra string }{{a, "    timeout: 10m\n    podSelector:\n      matchLabels:\n        app: query\n"}, {b, ""}, {other, ""}} {
			drain := ""
			if n.extra != "" {
				drain = "  drain:\n" + n.extra
			}
			docs = append(docs, fmt.Sprintf("apiVersion: nodemaintenance.medik8s.io/v1beta1\nkind: NodeMaintenance\nmetadata:\n  name: maintain-%s\n  labels:\n    query-test: %s\n    team: %s\nspec:\n  nodeName: %s\n  reason: made with kubectl\n%s",
				n.node, label, map[bool]string{true: "storage", false: "web"}[n.node == other], n.node, drain))
		}
		if err := os.WriteFile(manifest, []byte(strings.Join(docs, "---\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := c.Kubectl(ctx, "apply", "-f", manifest); err != nil {
			t.Fatalf("kubectl apply: %v\n%s", err, out)
		}
		for _, n := range []string{a, b, other} {
			waitPhase(t, c, "maintain-"+n, nmv1beta1.MaintenanceSucceeded)
		}

		dir := t.TempDir()
		writeFile(t, dir, "main.tf", requiredProvider+providerBlock(c))
		writeFile(t, dir, "maintenances.tfquery.hcl", fmt.Sprintf(`
list "nodemaintenance" "web" {
  provider = nodemaintenance
  config {
    label_selector = "query-test=%s,team!=storage"
  }
}

list "nodemaintenance" "succeeded_on_a" {
  provider = nodemaintenance
  config {
    node_name = %q
    phase     = "Succeeded"
  }
}
`, label, a))
		r := newRun(dir)
		out := r.mustRun(t, "query")
		for _, want := range []string{"maintain-" + a, "maintain-" + b, fmt.Sprintf("maintain-%s (node %s, Succeeded)", a, a)} {
			if !strings.Contains(out, want) {
				t.Errorf("terraform query does not list %q", want)
			}
		}
		if strings.Contains(out, "maintain-"+other) {
			t.Errorf("terraform query lists maintain-%s, which the label selector leaves out", other)
		}

		// The second list finds maintain-a again: generate from the first only.
		if err := os.Remove(filepath.Join(dir, "maintenances.tfquery.hcl")); err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, "maintenances.tfquery.hcl", fmt.Sprintf(`
list "nodemaintenance" "web" {
  provider         = nodemaintenance
  include_resource = true
  config {
    label_selector = "query-test=%s,team=web"
  }
}
`, label))
		r.mustRun(t, "query", "-generate-config-out=generated.tf")
		generated, err := os.ReadFile(filepath.Join(dir, "generated.tf"))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("generated.tf:\n%s", generated)
		for _, want := range []string{"import {", `node_name = "` + a + `"`, `node_name = "` + b + `"`, "made with kubectl", `pod_selector`} {
			if !strings.Contains(string(generated), want) {
				t.Errorf("generated.tf has no %q", want)
			}
		}
		if err := os.Remove(filepath.Join(dir, "maintenances.tfquery.hcl")); err != nil {
			t.Fatal(err)
		}
		applied := r.mustRun(t, "apply", "-auto-approve")
		if !strings.Contains(applied, "2 imported, 0 added, 0 changed, 0 destroyed") {
			t.Errorf("the apply of the generated imports did not import exactly the two maintenances and change nothing")
		}
		if out, err := r.run(t, "plan", "-detailed-exitcode"); err != nil || !strings.Contains(out, "No changes") {
			t.Errorf("the plan after the import is not empty (%v)", err)
		}
		if n := strings.Count(r.mustRun(t, "show"), "# nodemaintenance."); n != 2 {
			t.Errorf("the state holds %d nodemaintenances, want 2", n)
		}
		// Imported means owned: destroy restores both nodes.
		r.mustRun(t, "destroy", "-auto-approve")
		for _, n := range []string{a, b} {
			nodeMust(t, c, n, schedulable)
		}
		if _, err := c.Kubectl(ctx, "delete", "nm", "maintain-"+other, "--wait"); err != nil {
			t.Error(err)
		}
	})
}

// An action_trigger drains a node before another resource's update and
// restores it after: the audit log has the drain's create, then the
// resource's update, then the restore's delete, all by the provider.
func TestAccActionsDrainAroundAnUpdate(t *testing.T) {
	onTerraform(t, func(t *testing.T, c *testcluster.Cluster, newRun func(string) *cliRun) {
		pool := c.NewPool(t)
		drained, changed := pool.AddNode(t, "").Name, pool.AddNode(t, "").Name
		pool.AddNode(t, "") // room for what the drain moves
		ns := c.Namespace(t)
		c.CreateDeployment(t, ns, "act", 3, map[string]string{corev1.LabelHostname: drained})

		dir := t.TempDir()
		config := func(reason string) {
			writeFile(t, dir, "main.tf", requiredProvider+providerBlock(c)+fmt.Sprintf(`
action "nodemaintenance_drain" "host" {
  config {
    node_name = %[1]q
    reason    = "the change of nodemaintenance.change"
    drain = {
      timeout = "5m"
    }
  }
}

action "nodemaintenance_restore" "host" {
  config {
    node_name = %[1]q
  }
}

resource "nodemaintenance" "change" {
  node_name = %[2]q
  reason    = %[3]q
  lifecycle {
    action_trigger {
      events  = [before_update]
      actions = [action.nodemaintenance_drain.host]
    }
    action_trigger {
      events  = [after_update]
      actions = [action.nodemaintenance_restore.host]
    }
  }
}
`, drained, changed, reason))
		}
		r := newRun(dir)
		config("first")
		r.mustRun(t, "apply", "-auto-approve")
		nodeMust(t, c, drained, schedulable) // a create triggers neither action

		config("second")
		plan := r.mustRun(t, "plan")
		if !strings.Contains(plan, "Drain Preview: Node "+drained) {
			t.Errorf("the plan does not show the drain preview of node %s", drained)
		}
		out := r.mustRun(t, "apply", "-auto-approve")
		for _, want := range []string{
			fmt.Sprintf("NodeMaintenance maintain-%s created for node %s", drained, drained),
			fmt.Sprintf("node %s is drained", drained),
			fmt.Sprintf("node %s is restored", drained),
		} {
			if !strings.Contains(out, want) {
				t.Errorf("the apply's output has no progress line %q", want)
			}
		}
		nodeMust(t, c, drained, schedulable)
		if err := c.Client.Get(context.Background(), client.ObjectKey{Name: "maintain-" + drained}, &nmv1beta1.NodeMaintenance{}); !apierrors.IsNotFound(err) {
			t.Errorf("maintain-%s is still there after the restore action (%v)", drained, err)
		}
		wantProviderWrites(t, c, []string{"create maintain-" + drained, "patch maintain-" + changed, "delete maintain-" + drained})
		r.mustRun(t, "destroy", "-auto-approve")
	})
}

// wantProviderWrites checks that the provider's writes of NodeMaintenances,
// as the audit log has them, include want in that order.
func wantProviderWrites(t *testing.T, c *testcluster.Cluster, want []string) {
	t.Helper()
	events, err := c.AuditEvents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range events {
		if e.ObjectRef.Resource == "nodemaintenances" && e.ObjectRef.Subresource == "" &&
			strings.HasPrefix(e.UserAgent, "terraform-provider-nodemaintenance/") {
			got = append(got, e.Verb+" "+e.ObjectRef.Name)
		}
	}
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Errorf("the provider's writes in the audit log are %q; want %q in this order", got, want)
	}
}

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitPhase waits until NodeMaintenance name reaches phase.
func waitPhase(t *testing.T, c *testcluster.Cluster, name string, phase nmv1beta1.MaintenancePhase) {
	t.Helper()
	testcluster.WaitFor(t, 2*time.Minute, fmt.Sprintf("NodeMaintenance %s %s", name, phase), func(ctx context.Context) (bool, error) {
		nm := &nmv1beta1.NodeMaintenance{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, nm); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return nm.Status.Phase == phase, nil
	})
}

// nodeMust fails the test unless node passes check.
func nodeMust(t *testing.T, c *testcluster.Cluster, node string, check func(*corev1.Node) error) {
	t.Helper()
	n := &corev1.Node{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	if err := check(n); err != nil {
		t.Error(err)
	}
}
