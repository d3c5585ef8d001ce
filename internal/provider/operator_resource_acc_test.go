package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

func operatorConfig(c *testcluster.Cluster, ns, image string, replicas int) string {
	return providerBlock(c) + fmt.Sprintf(`
resource "nodemaintenance_operator" "this" {
  namespace       = %q
  image           = %q
  replicas        = %d
  max_unavailable = "50%%"
}
`, ns, image, replicas)
}

// The operator resource installs every object, waits until the Deployment is
// available (kwok runs its pods as fakes), updates image and replicas in
// place, imports, refuses to go while a NodeMaintenance exists (naming it),
// and then removes everything it created.
func TestAccOperatorInstallUpdateDestroy(t *testing.T) {
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		c.AddNode(t, testcluster.UniqueName(t, "node"), nil) // somewhere for the operator pods
		ns := testcluster.UniqueName(t, "nmo")
		// A maintenance that exists before the installation: the deployed
		// webhook is a Service the local API server cannot reach, so creates
		// must happen before it is installed.
		node := c.NewPool(t).AddNode(t, "").Name
		nmName := "blocker-" + node
		if err := c.Client.Create(context.Background(), &nmv1beta1.NodeMaintenance{ObjectMeta: metaName(nmName), Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node}}); err != nil {
			t.Fatal(err)
		}
		// Destroying the installation removes the CRD the package shares; a
		// failed run may leave the installation (and its webhook) behind.
		t.Cleanup(func() {
			ctx := context.Background()
			_ = c.Client.Delete(ctx, &nmv1beta1.NodeMaintenance{ObjectMeta: metaName(nmName)})
			if objs, err := config.OperatorObjects(config.OperatorOptions{Namespace: ns}); err == nil {
				for _, obj := range objs {
					if _, crd := obj.(*apiextensionsv1.CustomResourceDefinition); !crd {
						_ = c.Client.Delete(ctx, obj)
					}
				}
			}
			if err := c.InstallCRD(ctx); err != nil {
				t.Errorf("reinstall the CRD: %v", err)
			}
		})

		deployment := func(want func(*appsv1.Deployment) error) resource.TestCheckFunc {
			return func(*terraform.State) error {
				d := &appsv1.Deployment{}
				if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: config.OperatorName}, d); err != nil {
					return err
				}
				return want(d)
			}
		}
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: providerFactories,
			CheckDestroy: func(*terraform.State) error {
				for _, obj := range []client.Object{
					&appsv1.Deployment{ObjectMeta: metaNamespaced(ns, config.OperatorName)},
					&rbacv1.ClusterRole{ObjectMeta: metaName(config.OperatorName)},
					&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metaName(config.OperatorName)},
					&corev1.Namespace{ObjectMeta: metaName(ns)},
				} {
					if err := c.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
						return fmt.Errorf("%T %s still exists after destroy (%v)", obj, obj.GetName(), err)
					}
				}
				return nil
			},
			Steps: []resource.TestStep{
				{
					Config: operatorConfig(c, ns, "example.com/nmo:one", 1),
					ConfigStateChecks: []statecheck.StateCheck{
						statecheck.ExpectKnownValue("nodemaintenance_operator.this", tfjsonpath.New("id"), knownvalue.StringExact(ns)),
						statecheck.ExpectKnownValue("nodemaintenance_operator.this", tfjsonpath.New("objects"), knownvalue.ListSizeExact(16)),
						statecheck.ExpectKnownValue("nodemaintenance_operator.this", tfjsonpath.New("max_unavailable_policy"), knownvalue.StringExact("Queue")),
					},
					Check: resource.ComposeTestCheckFunc(
						deployment(func(d *appsv1.Deployment) error {
							if d.Status.AvailableReplicas != 1 {
								return fmt.Errorf("deployment not available: %+v", d.Status)
							}
							if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--max-unavailable-policy=Queue") {
								return fmt.Errorf("the default max_unavailable_policy is not passed to the operator: args %v", args)
							}
							return nil
						}),
						func(*terraform.State) error {
							for _, obj := range []client.Object{
								&corev1.ServiceAccount{ObjectMeta: metaNamespaced(ns, config.OperatorName)},
								&rbacv1.ClusterRoleBinding{ObjectMeta: metaName(config.OperatorName)},
								&rbacv1.Role{ObjectMeta: metaNamespaced(ns, config.OperatorName+"-leader-election")},
								&corev1.Service{ObjectMeta: metaNamespaced(ns, config.OperatorName+"-webhook")},
								&corev1.Service{ObjectMeta: metaNamespaced(ns, config.OperatorName+"-metrics")},
								&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metaName(config.OperatorName)},
							} {
								if err := c.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
									return err
								}
							}
							return nil
						},
					),
				},
				{
					Config: operatorConfig(c, ns, "example.com/nmo:two", 2),
					ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("nodemaintenance_operator.this", plancheck.ResourceActionUpdate),
					}},
					Check: deployment(func(d *appsv1.Deployment) error {
						if *d.Spec.Replicas != 2 || d.Spec.Template.Spec.Containers[0].Image != "example.com/nmo:two" || d.Status.AvailableReplicas != 2 {
							return fmt.Errorf("not updated in place: replicas %d image %s available %d", *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image, d.Status.AvailableReplicas)
						}
						return nil
					}),
				},
				{
					ResourceName:            "nodemaintenance_operator.this",
					ImportState:             true,
					ImportStateId:           ns,
					ImportStateVerify:       true,
					ImportStateVerifyIgnore: []string{"timeouts"},
				},
				{
					Config:      operatorConfig(c, ns, "example.com/nmo:two", 2),
					Destroy:     true,
					ExpectError: regexp.MustCompile(`(?s)NodeMaintenances Still Exist.*` + nmName),
				},
				{
					PreConfig: func() {
						_ = c.Client.Delete(context.Background(), &nmv1beta1.NodeMaintenance{ObjectMeta: metaName(nmName)})
						testcluster.WaitFor(t, time.Minute, nmName+" gone", func(ctx context.Context) (bool, error) {
							err := c.Client.Get(ctx, client.ObjectKey{Name: nmName}, &nmv1beta1.NodeMaintenance{})
							return apierrors.IsNotFound(err), nil
						})
					},
					Config: operatorConfig(c, ns, "example.com/nmo:two", 2),
				},
			},
		})
	})
}
