package manager

import (
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
)

// crdServedTimeout bounds InstallCRD's wait for the CRD to be established
// and served.
const crdServedTimeout = time.Minute

// InstallCRD creates or updates the embedded CRDs (NodeMaintenance and
// NodeMaintenanceRollout) and waits until each is established and served.
func InstallCRD(ctx context.Context, c client.Client) error {
	crds, err := config.CRDs()
	if err != nil {
		return err
	}
	lists := map[string]client.ObjectList{
		nmv1beta1.CRDName:         &nmv1beta1.NodeMaintenanceList{},
		nmv1alpha1.RolloutCRDName: &nmv1alpha1.NodeMaintenanceRolloutList{},
	}
	for _, crd := range crds {
		kind := crd.Spec.Names.Kind
		if err := createOrReplace(ctx, c, crd, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
			return fmt.Errorf("install the %s CRD: %w", kind, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, crdServedTimeout, true, func(ctx context.Context) (bool, error) {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
				return false, nil
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					// Established can come before discovery; a list proves it is served.
					return c.List(ctx, lists[crd.Name]) == nil, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("the %s CRD was not established and served within %s: %w", kind, crdServedTimeout, err)
		}
	}
	return nil
}

// InstallWebhookConfiguration creates or updates the ValidatingWebhookConfiguration.
func InstallWebhookConfiguration(ctx context.Context, c client.Client, name string, cc admissionregistrationv1.WebhookClientConfig) error {
	vwc, err := config.ValidatingWebhookConfiguration(name, cc)
	if err != nil {
		return err
	}
	if err := createOrReplace(ctx, c, vwc, &admissionregistrationv1.ValidatingWebhookConfiguration{}); err != nil {
		return fmt.Errorf("install ValidatingWebhookConfiguration %s: %w", name, err)
	}
	return nil
}

func createOrReplace(ctx context.Context, c client.Client, obj, existing client.Object) error {
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), existing)
	if apierrors.IsNotFound(err) {
		return c.Create(ctx, obj)
	}
	if err != nil {
		return err
	}
	obj.SetResourceVersion(existing.GetResourceVersion())
	return c.Update(ctx, obj)
}
