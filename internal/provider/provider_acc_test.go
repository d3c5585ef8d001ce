package provider_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/provider"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testoperator"
)

var operator *testoperator.Operator

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Options{InstallCRD: true, Audit: true, Setup: func(c *testcluster.Cluster) error {
		var err error
		operator, err = testoperator.Start(c, testoperator.DefaultOptions())
		return err
	}, Teardown: func() { operator.Stop() }}))
}

var providerFactories = map[string]func() (tfprotov6.ProviderServer, error){
	"nodemaintenance": providerserver.NewProtocol6WithError(provider.New("test")()),
}

// clis are the CLIs every acceptance test runs on, both built by `make tools`.
var clis = cliList()

// eachCLI runs the test body once per CLI, as subtests named after it.
func eachCLI(t *testing.T, body func(t *testing.T, c *testcluster.Cluster)) {
	c := testcluster.Get(t)
	for _, cli := range clis {
		t.Run(cli, func(t *testing.T) {
			path, err := testcluster.Tool(cli)
			if err != nil {
				t.Fatal(err)
			}
			t.Setenv("TF_ACC", "1")
			t.Setenv("CHECKPOINT_DISABLE", "1")
			t.Setenv("TF_ACC_TERRAFORM_PATH", path)
			// OpenTofu refuses the legacy "-" namespace the harness uses otherwise.
			t.Setenv("TF_ACC_PROVIDER_NAMESPACE", "hashicorp")
			body(t, c)
		})
	}
}

func providerBlock(c *testcluster.Cluster) string {
	return fmt.Sprintf("provider \"nodemaintenance\" {\n  config_path = %q\n}\n", c.KubeconfigPath)
}

func maintenanceConfig(c *testcluster.Cluster, node, reason, extra string) string {
	reasonLine := ""
	if reason != "" {
		reasonLine = fmt.Sprintf("  reason    = %q\n", reason)
	}
	return providerBlock(c) + fmt.Sprintf(`
resource "nodemaintenance" "this" {
  node_name = %q
%s  %s
}
`, node, reasonLine, extra)
}

// nodeCheck asserts something about a node while Terraform runs.
func nodeCheck(c *testcluster.Cluster, name string, want func(*corev1.Node) error) resource.TestCheckFunc {
	return func(*terraform.State) error {
		node := &corev1.Node{}
		if err := c.Client.Get(context.Background(), client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		return want(node)
	}
}

func cordoned(n *corev1.Node) error {
	if !n.Spec.Unschedulable {
		return fmt.Errorf("node %s is not cordoned", n.Name)
	}
	return nil
}

func schedulable(n *corev1.Node) error {
	if n.Spec.Unschedulable {
		return fmt.Errorf("node %s is still cordoned", n.Name)
	}
	for _, t := range n.Spec.Taints {
		if t.Key == "medik8s.io/drain" {
			return fmt.Errorf("node %s still has the drain taint", n.Name)
		}
	}
	return nil
}

// The whole life of a maintenance: create waits for Succeeded, import
// matches, the reason updates in place, a new node replaces (old restored, new
// drained), data sources read it, destroy restores the node.
func TestAccNodeMaintenanceLifecycle(t *testing.T) {
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		ns := c.Namespace(t)
		pool := c.NewPool(t)
		first := pool.AddNode(t, "").Name
		c.CreateDeployment(t, ns, "web", 3, pool.Selector())
		c.WaitRunningPods(t, ns, "web", first, 3)
		second := pool.AddNode(t, "").Name
		pool.AddNode(t, "") // room for the pods of both

		dataSources := `
data "nodemaintenance" "this" {
  name = nodemaintenance.this.name
}
data "nodemaintenance_list" "succeeded" {
  phase      = "Succeeded"
  node_name  = nodemaintenance.this.node_name
  depends_on = [nodemaintenance.this]
}
`
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: providerFactories,
			CheckDestroy: func(*terraform.State) error {
				if err := schedulable(mustNode(c, first)); err != nil {
					return err
				}
				return schedulable(mustNode(c, second))
			},
			Steps: []resource.TestStep{
				{
					Config: maintenanceConfig(c, first, "硬體更換 - RAM 升級", "timeouts {\n    create = \"5m\"\n  }"),
					ConfigStateChecks: []statecheck.StateCheck{
						statecheck.ExpectKnownValue("nodemaintenance.this", tfjsonpath.New("phase"), knownvalue.StringExact("Succeeded")),
						statecheck.ExpectKnownValue("nodemaintenance.this", tfjsonpath.New("name"), knownvalue.StringExact("maintain-"+first)),
						statecheck.ExpectKnownValue("nodemaintenance.this", tfjsonpath.New("drain_progress"), knownvalue.Int64Exact(100)),
						statecheck.ExpectKnownValue("nodemaintenance.this", tfjsonpath.New("eviction_pods"), knownvalue.Int64Exact(3)),
						statecheck.ExpectKnownValue("nodemaintenance.this", tfjsonpath.New("total_pods"), knownvalue.Int64Exact(3)),
						statecheck.ExpectKnownValue("nodemaintenance.this", tfjsonpath.New("pending_pods"), knownvalue.ListSizeExact(0)),
						statecheck.ExpectKnownValue("nodemaintenance.this", tfjsonpath.New("last_error"), knownvalue.StringExact("")),
					},
					Check: nodeCheck(c, first, cordoned),
				},
				{
					ResourceName:            "nodemaintenance.this",
					ImportState:             true,
					ImportStateId:           "maintain-" + first,
					ImportStateVerify:       true,
					ImportStateVerifyIgnore: []string{"timeouts"},
				},
				{
					Config: maintenanceConfig(c, first, "firmware update", "timeouts {\n    create = \"5m\"\n  }"),
					ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("nodemaintenance.this", plancheck.ResourceActionUpdate),
					}},
					Check: func(*terraform.State) error {
						nm := &nmv1beta1.NodeMaintenance{}
						if err := c.Client.Get(context.Background(), client.ObjectKey{Name: "maintain-" + first}, nm); err != nil {
							return err
						}
						if nm.Spec.Reason != "firmware update" {
							return fmt.Errorf("reason in the cluster is %q", nm.Spec.Reason)
						}
						return nil
					},
				},
				{
					Config: maintenanceConfig(c, second, "firmware update", "") + dataSources,
					ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("nodemaintenance.this", plancheck.ResourceActionDestroyBeforeCreate),
					}},
					ConfigStateChecks: []statecheck.StateCheck{
						statecheck.ExpectKnownValue("nodemaintenance.this", tfjsonpath.New("node_name"), knownvalue.StringExact(second)),
						statecheck.ExpectKnownValue("data.nodemaintenance.this", tfjsonpath.New("phase"), knownvalue.StringExact("Succeeded")),
						statecheck.ExpectKnownValue("data.nodemaintenance.this", tfjsonpath.New("node_name"), knownvalue.StringExact(second)),
						statecheck.ExpectKnownValue("data.nodemaintenance.this", tfjsonpath.New("reason"), knownvalue.StringExact("firmware update")),
						statecheck.ExpectKnownValue("data.nodemaintenance_list.succeeded", tfjsonpath.New("names"), knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("maintain-" + second)})),
						statecheck.ExpectKnownValue("data.nodemaintenance_list.succeeded", tfjsonpath.New("all_succeeded"), knownvalue.Bool(true)),
					},
					Check: resource.ComposeTestCheckFunc(nodeCheck(c, first, schedulable), nodeCheck(c, second, cordoned)),
				},
			},
		})
	})
}

func mustNode(c *testcluster.Cluster, name string) *corev1.Node {
	node := &corev1.Node{}
	_ = c.Client.Get(context.Background(), client.ObjectKey{Name: name}, node)
	return node
}

// A NodeMaintenance deleted behind Terraform's back is drift: the plan
// recreates it.
func TestAccNodeMaintenanceDeletedOutOfBand(t *testing.T) {
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		node := c.NewPool(t).AddNode(t, "").Name
		name := "maintain-" + node
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: providerFactories,
			Steps: []resource.TestStep{
				{Config: maintenanceConfig(c, node, "", "")},
				{
					PreConfig: func() {
						ctx := context.Background()
						_ = c.Client.Delete(ctx, &nmv1beta1.NodeMaintenance{ObjectMeta: metaName(name)})
						testcluster.WaitFor(t, time.Minute, name+" gone", func(ctx context.Context) (bool, error) {
							err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &nmv1beta1.NodeMaintenance{})
							return apierrors.IsNotFound(err), nil
						})
					},
					Config: maintenanceConfig(c, node, "", ""),
					ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("nodemaintenance.this", plancheck.ResourceActionCreate),
					}},
					Check: nodeCheck(c, node, cordoned),
				},
			},
		})
	})
}

// The webhook's refusal reaches the user verbatim.
func TestAccNodeMaintenanceUnknownNode(t *testing.T) {
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: providerFactories,
			Steps: []resource.TestStep{{
				Config:      maintenanceConfig(c, "no-such-node", "", ""),
				ExpectError: regexp.MustCompile(`node "no-such-node" does not exist`),
			}},
		})
	})
}

// A PDB that never allows an eviction and a short create timeout: the error
// names the blocked pod and says how to raise the timeout; destroy restores.
func TestAccNodeMaintenanceTimeoutNamesBlockedPod(t *testing.T) {
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		ns := c.Namespace(t)
		pool := c.NewPool(t)
		node := pool.AddNode(t, "").Name
		c.CreateDeployment(t, ns, "stuck", 2, pool.Selector())
		c.CreatePDB(t, ns, "stuck", ptr.To(intstr.FromInt32(2)), nil)
		c.WaitRunningPods(t, ns, "stuck", node, 2)
		pool.AddNode(t, "")
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: providerFactories,
			CheckDestroy:             func(*terraform.State) error { return schedulable(mustNode(c, node)) },
			Steps: []resource.TestStep{{
				Config:      maintenanceConfig(c, node, "", "timeouts {\n    create = \"5s\"\n  }"),
				ExpectError: regexp.MustCompile(`(?s)Timed Out Waiting for the Node to Drain.*Still pending: ` + ns + `/stuck-.*disruption budget stuck.*timeouts`),
			}},
		})
	})
}

// A maintenance that fails (its lease is taken while it drains) is an apply
// error with the operator's words, and the resource is tainted: the next apply
// replaces it, and destroy restores the node.
func TestAccNodeMaintenanceFailedIsTainted(t *testing.T) {
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		ns := c.Namespace(t)
		pool := c.NewPool(t)
		node := pool.AddNode(t, "").Name
		c.CreateDeployment(t, ns, "held", 1, pool.Selector())
		c.CreatePDB(t, ns, "held", ptr.To(intstr.FromInt32(1)), nil)
		c.WaitRunningPods(t, ns, "held", node, 1)
		name := "maintain-" + node
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: providerFactories,
			CheckDestroy:             func(*terraform.State) error { return schedulable(mustNode(c, node)) },
			Steps: []resource.TestStep{
				{
					PreConfig:   func() { go stealLeaseOnceDraining(t, c, name, node) },
					Config:      maintenanceConfig(c, node, "", ""),
					ExpectError: regexp.MustCompile(`(?s)Node Maintenance Failed.*could not hold the lease.*tainted`),
				},
				{
					// The lease and the PDB are out of the way: the tainted
					// resource is replaced and this time succeeds.
					PreConfig: func() {
						ctx := context.Background()
						if _, err := c.Kubectl(ctx, "-n", "medik8s-leases", "delete", "lease", "node-"+node); err != nil {
							t.Error(err)
						}
						if _, err := c.Kubectl(ctx, "-n", ns, "delete", "pdb", "held"); err != nil {
							t.Error(err)
						}
					},
					Config: maintenanceConfig(c, node, "", ""),
					ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("nodemaintenance.this", plancheck.ResourceActionDestroyBeforeCreate),
					}},
					ConfigStateChecks: []statecheck.StateCheck{
						statecheck.ExpectKnownValue("nodemaintenance.this", tfjsonpath.New("phase"), knownvalue.StringExact("Succeeded")),
					},
				},
			},
		})
	})
}

// stealLeaseOnceDraining waits until the maintenance has touched the node,
// then gives the node lease to another holder for an hour.
func stealLeaseOnceDraining(t *testing.T, c *testcluster.Cluster, name, node string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		nm := &nmv1beta1.NodeMaintenance{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, nm); err == nil && nm.Status.Phase == nmv1beta1.MaintenanceRunning && nm.Status.EvictionPods > 0 {
			out, err := c.Kubectl(ctx, "-n", "medik8s-leases", "patch", "lease", "node-"+node, "--type=merge", "-p",
				fmt.Sprintf(`{"spec":{"holderIdentity":"thief","leaseDurationSeconds":3600,"renewTime":%q}}`, time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")))
			if err == nil {
				return
			}
			t.Logf("steal lease: %v %s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
