package provider_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// rolloutConfig is a nodemaintenance_rollout named name with the given
// attributes (HCL lines), and a data source that reads it.
func rolloutConfig(c *testcluster.Cluster, name string, attrs ...string) string {
	return providerBlock(c) + fmt.Sprintf(`
resource "nodemaintenance_rollout" "this" {
  name = %q
  %s
  timeouts {
    create = "5m"
    update = "5m"
    delete = "5m"
  }
}
`, name, strings.Join(attrs, "\n  "))
}

const rolloutDataSource = `
data "nodemaintenance_rollout" "this" {
  name = nodemaintenance_rollout.this.name
}
`

// stepAttr is a step whose Job kwok completes at once (it completes the
// pods of Jobs by itself).
func stepAttr(ns string) string {
	return fmt.Sprintf(`step = {
    namespace = %q
    timeout   = "2m"
    job_template = yamlencode({
      spec = {
        backoffLimit = 0
        template = {
          spec = {
            restartPolicy = "Never"
            containers    = [{ name = "patch", image = %q, command = ["sh", "-c", "echo patched"] }]
          }
        }
      }
    })
  }`, ns, testcluster.PauseImage)
}

// rolloutGone checks that the rollout is gone and its nodes schedulable.
func rolloutGone(c *testcluster.Cluster, name string, nodes ...string) func(*terraform.State) error {
	return func(*terraform.State) error {
		err := c.Client.Get(context.Background(), client.ObjectKey{Name: name}, &nmv1alpha1.NodeMaintenanceRollout{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("rollout %s is still there (%v)", name, err)
		}
		return allSchedulable(c, nodes...)(nil)
	}
}

func allSchedulable(c *testcluster.Cluster, nodes ...string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		var errs []error
		for _, n := range nodes {
			errs = append(errs, schedulable(mustNode(c, n)))
		}
		return errors.Join(errs...)
	}
}

func phaseIs(phase string) statecheck.StateCheck {
	return statecheck.ExpectKnownValue("nodemaintenance_rollout.this", tfjsonpath.New("phase"), knownvalue.StringExact(phase))
}

func nodeRow(i int, field string, check knownvalue.Check) statecheck.StateCheck {
	return statecheck.ExpectKnownValue("nodemaintenance_rollout.this", tfjsonpath.New("nodes").AtSliceIndex(i).AtMapKey(field), check)
}

// A rollout of three nodes by label, two at a time, with a step Job: apply
// waits for Succeeded and every node is restored; the plan after it is
// empty; the data source reads it; import matches; deleted behind
// Terraform's back it is created again; destroy deletes it.
func TestAccRolloutLifecycle(t *testing.T) {
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		ns := c.Namespace(t)
		pool := c.NewPool(t)
		var nodes []string
		for range 3 {
			nodes = append(nodes, pool.AddNode(t, "").Name)
		}
		name := testcluster.UniqueName(t, "patch")
		config := rolloutConfig(c, name,
			fmt.Sprintf("node_selector = %q", testcluster.PoolLabel+"="+pool.Value),
			`max_unavailable = "2"`, `soak_for = "1s"`, `reason = "kernel 6.12"`, stepAttr(ns)) + rolloutDataSource
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: providerFactories,
			CheckDestroy:             rolloutGone(c, name, nodes...),
			Steps: []resource.TestStep{
				{
					Config: config,
					ConfigStateChecks: []statecheck.StateCheck{
						phaseIs("Succeeded"),
						statecheck.ExpectKnownValue("nodemaintenance_rollout.this", tfjsonpath.New("total"), knownvalue.Int64Exact(3)),
						statecheck.ExpectKnownValue("nodemaintenance_rollout.this", tfjsonpath.New("done"), knownvalue.Int64Exact(3)),
						statecheck.ExpectKnownValue("nodemaintenance_rollout.this", tfjsonpath.New("failed"), knownvalue.Int64Exact(0)),
						nodeRow(0, "wave", knownvalue.Int64Exact(1)), nodeRow(1, "wave", knownvalue.Int64Exact(1)), nodeRow(2, "wave", knownvalue.Int64Exact(2)),
						nodeRow(0, "state", knownvalue.StringExact("Done")), nodeRow(2, "state", knownvalue.StringExact("Done")),
						nodeRow(0, "job", knownvalue.StringRegexp(regexp.MustCompile(`.+`))),
						statecheck.ExpectKnownValue("data.nodemaintenance_rollout.this", tfjsonpath.New("phase"), knownvalue.StringExact("Succeeded")),
						statecheck.ExpectKnownValue("data.nodemaintenance_rollout.this", tfjsonpath.New("done"), knownvalue.Int64Exact(3)),
					},
					Check: resource.ComposeTestCheckFunc(allSchedulable(c, nodes...), stepJobsRan(c, ns, name, nodes)),
				},
				{
					Config:           config,
					ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				},
				{
					ResourceName:      "nodemaintenance_rollout.this",
					ImportState:       true,
					ImportStateId:     name,
					ImportStateVerify: true,
					// An import has no configuration to keep the words of:
					// the template comes back as the API's JSON, 2m as 2m0s
					// (after an apply the resource keeps what was written,
					// as they mean the same).
					ImportStateVerifyIgnore: []string{"timeouts", "step.job_template", "step.timeout"},
				},
				{
					// Deleted behind Terraform's back: drift, created again.
					PreConfig: func() { deleteRolloutAndWait(t, c, name) },
					Config:    config,
					ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("nodemaintenance_rollout.this", plancheck.ResourceActionCreate),
					}},
					ConfigStateChecks: []statecheck.StateCheck{phaseIs("Succeeded")},
				},
			},
		})
	})
}

func deleteRolloutAndWait(t *testing.T, c *testcluster.Cluster, name string) {
	if err := c.Client.Delete(context.Background(), &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metaName(name)}); err != nil {
		t.Fatalf("delete rollout %s: %v", name, err)
	}
	testcluster.WaitFor(t, time.Minute, "rollout "+name+" gone", func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &nmv1alpha1.NodeMaintenanceRollout{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// stepJobsRan checks that each node's step Job ran on that node.
func stepJobsRan(c *testcluster.Cluster, ns, rollout string, nodes []string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		out, err := c.Kubectl(context.Background(), "-n", ns, "get", "jobs", "-l", nmv1alpha1.RolloutLabel+"="+rollout,
			"-o", `jsonpath={range .items[*]}{.metadata.labels.nodemaintenance\.io/node}={.status.succeeded}{"\n"}{end}`)
		if err != nil {
			return fmt.Errorf("list step jobs: %v %s", err, out)
		}
		for _, n := range nodes {
			if !strings.Contains(out, n+"=1") {
				return fmt.Errorf("no succeeded step Job for node %s; Jobs by node: %q", n, out)
			}
		}
		return nil
	}
}

// Pause in place: created paused, the apply waits only for the node set;
// resumed behind Terraform's back, a rollout that is still running (each
// node held 15s) is paused by an update in place, which waits for Paused;
// unpaused with a larger max_unavailable, the update in place waits for
// Succeeded. Destroy restores every node.
func TestAccRolloutPauseInPlace(t *testing.T) {
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		pool := c.NewPool(t)
		var nodes []string
		for range 3 {
			nodes = append(nodes, pool.AddNode(t, "").Name)
		}
		name := testcluster.UniqueName(t, "pause")
		config := func(paused bool, maxUnavailable int) string {
			return rolloutConfig(c, name, fmt.Sprintf("node_names = [%q, %q, %q]", nodes[0], nodes[1], nodes[2]),
				`hold_for = "15s"`, fmt.Sprintf("paused = %v", paused), fmt.Sprintf("max_unavailable = \"%d\"", maxUnavailable))
		}
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: providerFactories,
			CheckDestroy:             rolloutGone(c, name, nodes...),
			Steps: []resource.TestStep{
				{
					Config: config(true, 1),
					ConfigStateChecks: []statecheck.StateCheck{
						phaseIs("Paused"),
						statecheck.ExpectKnownValue("nodemaintenance_rollout.this", tfjsonpath.New("total"), knownvalue.Int64Exact(3)),
						nodeRow(0, "state", knownvalue.StringExact("Waiting")),
						nodeRow(0, "name", knownvalue.StringExact(nodes[0])),
					},
				},
				{
					PreConfig: func() { resumeUntilHolding(t, c, name, nodes[0]) },
					Config:    config(true, 1),
					ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("nodemaintenance_rollout.this", plancheck.ResourceActionUpdate),
					}},
					ConfigStateChecks: []statecheck.StateCheck{
						phaseIs("Paused"),
						nodeRow(2, "state", knownvalue.StringExact("Waiting")),
					},
				},
				{
					// Resumed with room for both nodes left: in place too.
					Config: config(false, 2),
					ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("nodemaintenance_rollout.this", plancheck.ResourceActionUpdate),
					}},
					ConfigStateChecks: []statecheck.StateCheck{
						phaseIs("Succeeded"),
						statecheck.ExpectKnownValue("nodemaintenance_rollout.this", tfjsonpath.New("done"), knownvalue.Int64Exact(3)),
					},
					Check: resource.ComposeTestCheckFunc(allSchedulable(c, nodes...), func(*terraform.State) error {
						ro := &nmv1alpha1.NodeMaintenanceRollout{}
						if err := c.Client.Get(context.Background(), client.ObjectKey{Name: name}, ro); err != nil {
							return err
						}
						if ro.Spec.MaxUnavailable == nil || ro.Spec.MaxUnavailable.String() != "2" {
							return fmt.Errorf("spec.maxUnavailable %v, want 2", ro.Spec.MaxUnavailable)
						}
						return nil
					}),
				},
			},
		})
	})
}

// resumeUntilHolding unpauses the rollout behind Terraform's back and waits
// until node holds it: the rollout is running when the next step pauses it.
func resumeUntilHolding(t *testing.T, c *testcluster.Cluster, name, node string) {
	if out, err := c.Kubectl(context.Background(), "patch", "nmr", name, "--type=merge", "-p", `{"spec":{"paused":false}}`); err != nil {
		t.Fatalf("unpause rollout %s: %v %s", name, err, out)
	}
	testcluster.WaitFor(t, time.Minute, "node "+node+" to be held by rollout "+name, func(ctx context.Context) (bool, error) {
		ro := &nmv1alpha1.NodeMaintenanceRollout{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, ro); err != nil {
			return false, err
		}
		return len(ro.Status.Nodes) > 0 && ro.Status.Nodes[0].State == nmv1alpha1.NodeHolding, nil
	})
}

// Bad input is refused at plan time, naming the attribute; a drain that
// times out (on_timeout Fail, against a budget that allows no eviction)
// halts the rollout, and the apply's error names the node and why; destroy
// restores every node.
func TestAccRolloutHalted(t *testing.T) {
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		ns := c.Namespace(t)
		pool := c.NewPool(t)
		first := pool.AddNode(t, "").Name
		blocked := pool.AddNode(t, "").Name
		last := pool.AddNode(t, "").Name
		c.CreateDeployment(t, ns, "held", 1, map[string]string{"kubernetes.io/hostname": blocked})
		c.CreatePDB(t, ns, "held", nil, ptr.To(intstr.FromInt32(0)))
		c.WaitRunningPods(t, ns, "held", blocked, 1)
		name := testcluster.UniqueName(t, "halt")
		names := fmt.Sprintf("node_names = [%q, %q, %q]", first, blocked, last)
		drain := `drain = {
    timeout    = "3s"
    on_timeout = "Fail"
  }`
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: providerFactories,
			CheckDestroy:             rolloutGone(c, name, first, blocked, last),
			Steps: []resource.TestStep{
				{
					Config:      rolloutConfig(c, name, `node_selector = "nodemaintenance.test/pool=no-such-pool"`),
					PlanOnly:    true,
					ExpectError: regexp.MustCompile(`No\s+Node\s+Matches\s+the\s+Selector`),
				},
				{
					Config:      rolloutConfig(c, name, fmt.Sprintf("node_names = [%q, \"no-such-node\"]", first)),
					PlanOnly:    true,
					ExpectError: regexp.MustCompile(`(?s)Node\s+Not\s+Found.*no-such-node`),
				},
				{
					Config:      rolloutConfig(c, name, names, `max_unavailable = "0"`),
					PlanOnly:    true,
					ExpectError: regexp.MustCompile(`max_unavailable\s+0\s+must\s+be\s+at\s+least\s+1`),
				},
				{
					Config:      rolloutConfig(c, name, names, drain),
					ExpectError: regexp.MustCompile(`(?s)Node\s+Maintenance\s+Rollout\s+Halted.*node\s+` + blocked + `\s+\(wave\s+2.*timeout.*tainted`),
				},
			},
		})
	})
}
