package provider_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// The drain preview, on both CLIs, for a node with a PodDisruptionBudget at 0
// over two pods and a bare pod:
//   - the data source lists the evicted pods and the risks, and is blocked;
//   - `plan` of a nodemaintenance resource for that node shows the preview
//     and the blocker as warnings and succeeds; for a node that does not
//     exist it says it could not preview, and still succeeds;
//   - the CI example examples/drain-preview fails `plan` for that node with
//     the budget named, and passes for a node with nothing to fear.
func TestAccDrainPreview(t *testing.T) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join(root, "examples", "drain-preview", "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		ns := c.Namespace(t)
		pool := c.NewPool(t)
		node := pool.AddNode(t, "").Name
		c.CreateDeployment(t, ns, "db", 2, pool.Selector())
		c.CreatePDB(t, ns, "db", ptr.To(intstr.FromInt32(2)), nil)
		c.CreateBarePod(t, ns, "debug", node)
		c.WaitRunningPods(t, ns, "db", node, 2)
		c.WaitRunningPods(t, ns, "debug", node, 1)
		spare := pool.AddNode(t, "")
		c.WaitNotReadyTaintGone(t, spare)
		testcluster.WaitFor(t, time.Minute, "the budget to count its pods", func(ctx context.Context) (bool, error) {
			pdb := &policyv1.PodDisruptionBudget{}
			if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db"}, pdb); err != nil {
				return false, err
			}
			return pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.CurrentHealthy == 2, nil
		})

		preview := "data.nodemaintenance_drain_preview.this"
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: providerFactories,
			Steps: []resource.TestStep{{
				Config: providerBlock(c) + fmt.Sprintf(`
data "nodemaintenance_drain_preview" "this" {
  node_name = %q
}
`, node),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(preview, tfjsonpath.New("blocked"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(preview, tfjsonpath.New("evict"), knownvalue.ListSizeExact(3)),
					statecheck.ExpectKnownValue(preview, tfjsonpath.New("skip"), knownvalue.ListSizeExact(0)),
					statecheck.ExpectKnownValue(preview, tfjsonpath.New("wait_for"), knownvalue.ListSizeExact(0)),
					statecheck.ExpectKnownValue(preview, tfjsonpath.New("unplaced_pods"), knownvalue.ListSizeExact(0)),
					statecheck.ExpectKnownValue(preview, tfjsonpath.New("blockers"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringRegexp(regexp.MustCompile(`^PodDisruptionBudget ` + ns + `/db allows no disruption now \(2 healthy pods, 2 required\)`))})),
					statecheck.ExpectKnownValue(preview, tfjsonpath.New("risks").AtSliceIndex(0).AtMapKey("kind"), knownvalue.StringExact("PDBAllowsNoDisruption")),
					statecheck.ExpectKnownValue(preview, tfjsonpath.New("risks").AtSliceIndex(0).AtMapKey("pods"), knownvalue.ListSizeExact(2)),
					statecheck.ExpectKnownValue(preview, tfjsonpath.New("warnings"), knownvalue.ListPartial(map[int]knownvalue.Check{
						1: knownvalue.StringExact("pod " + ns + "/debug has no controller: it will be deleted and not recreated elsewhere")})),
				},
			}},
		})

		dir := t.TempDir()
		tf := newCLIRun(t, dir)
		write := func(name, content string) {
			t.Helper()
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write("provider.tf", providerBlock(c)+`
terraform {
  required_providers {
    nodemaintenance = {
      source = "nodemaintenance/nodemaintenance"
    }
  }
}
`)
		write("main.tf", `
variable "node_name" {
  type = string
}

resource "nodemaintenance" "this" {
  node_name = var.node_name
}
`)
		// The CLIs wrap diagnostics: compare with the words only.
		flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }
		out := flat(tf.mustRun(t, "plan", "-input=false", "-var", "node_name="+node))
		for _, phrase := range []string{
			"Warning: Drain Preview: Node " + node,
			"A drain of node " + node + " now would evict 3 pods",
			"Warning: The Drain Will Wait: PodDisruptionBudget " + ns + "/db",
			"Warning: Outage, Not a Move: Deployment " + ns + "/db",
			"Warning: Pod Deleted for Good: pod " + ns + "/debug",
		} {
			if !strings.Contains(out, phrase) {
				t.Errorf("plan does not say %q", phrase)
			}
		}
		out = flat(tf.mustRun(t, "plan", "-input=false", "-var", "node_name=no-such-node"))
		if !strings.Contains(out, "Warning: Drain Preview Unavailable") || !strings.Contains(out, `there is no node "no-such-node"`) {
			t.Errorf("plan for a node that does not exist does not say it could not preview")
		}

		// The CI example, as a user runs it (it names the provider's source
		// itself).
		write("provider.tf", providerBlock(c))
		write("main.tf", string(example))
		out, err := tf.run(t, "plan", "-input=false", "-var", "node_name="+node)
		if err == nil {
			t.Errorf("the example's plan passed for node %s, whose budget allows no disruption", node)
		}
		if !strings.Contains(flat(out), "A drain of node "+node+" would wait: PodDisruptionBudget "+ns+"/db allows no disruption now") {
			t.Errorf("the example's plan does not name the blocker")
		}
		out = flat(tf.mustRun(t, "plan", "-input=false", "-var", "node_name="+spare.Name))
		if !strings.Contains(out, "A drain of node "+spare.Name+" now would evict 0 pods") {
			t.Errorf("the example's plan for the spare node does not show the summary")
		}
	})
}
