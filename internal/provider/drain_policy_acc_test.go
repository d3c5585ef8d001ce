package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// The drain block, on both CLIs:
//   - a bad policy is refused at plan time, in the block's names;
//   - on_timeout = "Restore" against a PDB that never allows: apply fails
//     saying the node was restored, the node is schedulable again, the
//     NodeMaintenance is gone and the resource is not in the state;
//   - a pod_selector drain (`!=`, as kubectl -l takes it) succeeds with only
//     the matching pods gone, the durations, the selector and a false
//     delete_empty_dir_data stay as written (no diff on the plan after apply), the
//     conditions are exposed, and nodemaintenance_list filters on them.
func TestAccDrainPolicy(t *testing.T) {
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		ns := c.Namespace(t)
		pool := c.NewPool(t)
		blocked := pool.AddNode(t, "").Name
		c.CreateDeployment(t, ns, "db", 2, map[string]string{"kubernetes.io/hostname": blocked})
		c.CreatePDB(t, ns, "db", ptr.To(intstr.FromInt32(2)), nil)
		c.WaitRunningPods(t, ns, "db", blocked, 2)

		selective := pool.AddNode(t, "").Name
		c.CreateDeployment(t, ns, "web", 2, map[string]string{"kubernetes.io/hostname": selective})
		c.CreateDeployment(t, ns, "batch", 2, map[string]string{"kubernetes.io/hostname": selective})
		c.WaitRunningPods(t, ns, "web", selective, 2)
		c.WaitRunningPods(t, ns, "batch", selective, 2)

		drained := providerBlock(c) + fmt.Sprintf(`
resource "nodemaintenance" "this" {
  node_name = %q
  drain = {
    timeout               = "1h"
    pod_selector          = "app!=web"
    delete_empty_dir_data = false
  }
}

data "nodemaintenance_list" "drained" {
  condition  = "Drained"
  depends_on = [nodemaintenance.this]
}

data "nodemaintenance_list" "not_drained" {
  condition  = "Drained=False"
  depends_on = [nodemaintenance.this]
}
`, selective)
		name := "maintain-" + selective
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: providerFactories,
			CheckDestroy: func(*terraform.State) error {
				for _, n := range []string{blocked, selective} {
					if err := schedulable(mustNode(c, n)); err != nil {
						return err
					}
				}
				return nil
			},
			Steps: []resource.TestStep{
				{
					Config: maintenanceConfig(c, blocked, "", `drain = {
    on_timeout = "Fail"
  }`),
					PlanOnly:    true,
					ExpectError: regexp.MustCompile(`(?s)Invalid Drain Policy.*drain.on_timeout\sFail\sneeds\sdrain.timeout`),
				},
				{
					Config: maintenanceConfig(c, blocked, "", `drain = {
    timeout    = "3s"
    on_timeout = "Restore"
  }`),
					ExpectError: regexp.MustCompile(`(?s)Node Restored After the Drain Timed Out.*` + blocked + `.*was\sdeleted.*disruption\sbudget\sdb`),
				},
				{
					PreConfig: func() {
						if err := schedulable(mustNode(c, blocked)); err != nil {
							t.Errorf("after on_timeout Restore: %v", err)
						}
						err := c.Client.Get(context.Background(), client.ObjectKey{Name: "maintain-" + blocked}, &nmv1beta1.NodeMaintenance{})
						if !apierrors.IsNotFound(err) {
							t.Errorf("the NodeMaintenance of the restored node is still there (%v)", err)
						}
					},
					Config: drained,
					ConfigStateChecks: []statecheck.StateCheck{
						statecheck.ExpectKnownValue("nodemaintenance.this", tfjsonpath.New("phase"), knownvalue.StringExact("Succeeded")),
						statecheck.ExpectKnownValue("nodemaintenance.this", tfjsonpath.New("drain").AtMapKey("timeout"), knownvalue.StringExact("1h")),
						statecheck.ExpectKnownValue("nodemaintenance.this", tfjsonpath.New("drain").AtMapKey("pod_selector"), knownvalue.StringExact("app!=web")),
						statecheck.ExpectKnownValue("nodemaintenance.this", tfjsonpath.New("drain").AtMapKey("delete_empty_dir_data"), knownvalue.Bool(false)),
						statecheck.ExpectKnownValue("data.nodemaintenance_list.drained", tfjsonpath.New("names"), knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact(name)})),
						statecheck.ExpectKnownValue("data.nodemaintenance_list.not_drained", tfjsonpath.New("names"), knownvalue.ListExact([]knownvalue.Check{})),
					},
					Check: resource.ComposeTestCheckFunc(resource.TestCheckTypeSetElemNestedAttrs("nodemaintenance.this", "conditions.*",
						map[string]string{"type": "Drained", "status": "True", "reason": "Drained"}), func(*terraform.State) error {
						pods, err := c.PodsOnNode(context.Background(), selective)
						if err != nil {
							return err
						}
						left := map[string]int{}
						for _, p := range pods {
							if p.DeletionTimestamp == nil {
								left[p.Labels["app"]]++
							}
						}
						if left["web"] != 2 || left["batch"] != 0 {
							return fmt.Errorf("pods left on %s by app: %v, want the 2 web pods only (pod_selector app!=web)", selective, left)
						}
						return nil
					}),
				},
			},
		})
	})
}
