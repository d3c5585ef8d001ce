package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	nmvalidation "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
)

// What the nodemaintenance_operator resource does in the cluster: apply the
// installation and wait for it, and remove it.

// apply server-side applies every object and waits for the CRD and the
// Deployment. It reports whether anything was applied.
func (r *OperatorResource) apply(ctx context.Context, plan *operatorResourceModel, timeout time.Duration) (bool, diag.Diagnostics) {
	opts, diags := plan.applyOptions(ctx)
	for name, q := range map[string]string{"cpu_request": plan.CPURequest.ValueString(), "memory_request": plan.MemoryRequest.ValueString(), "memory_limit": plan.MemoryLimit.ValueString()} {
		if _, err := k8sresource.ParseQuantity(q); err != nil {
			diags.AddAttributeError(path.Root(name), "Invalid Quantity", fmt.Sprintf("%q is not a Kubernetes quantity (like 100m or 128Mi): %v", q, err))
		}
	}
	if (plan.WebhookURL.ValueString() == "") != (plan.WebhookCA.ValueString() == "") {
		diags.AddAttributeError(path.Root("webhook_url"), "Incomplete Webhook Settings",
			"webhook_url and webhook_ca_bundle go together: the API server needs the CA to trust the certificate served at the URL.")
	}
	if diags.HasError() {
		return false, diags
	}
	objs, err := config.OperatorObjects(opts)
	if err != nil {
		diags.AddError("Cannot Render the Operator Installation", err.Error())
		return false, diags
	}
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	applied := false
	for _, obj := range objs {
		body, err := json.Marshal(obj)
		if err != nil {
			diags.AddError("Cannot Render the Operator Installation", err.Error())
			return applied, diags
		}
		patch := client.RawPatch(k8stypes.ApplyPatchType, body)
		if err := r.clients.kube.Patch(waitCtx, obj, patch, client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
			r.clients.apiError(&diags, "Cannot Install the Operator", fmt.Sprintf("Applying %s", objectName(obj)), err)
			return applied, diags
		}
		applied = true
	}
	plan.ID = types.StringValue(opts.Namespace)
	plan.Objects = objectNames(objs)
	tflog.Info(ctx, fmt.Sprintf("applied %d objects of the node-maintenance operator in namespace %s; waiting for the CRD and the Deployment", len(objs), opts.Namespace))
	if msg := r.waitReady(waitCtx, opts.Namespace); msg != "" {
		diags.AddError("Timed Out Waiting for the Operator", fmt.Sprintf("%s (timeout %s). Raise it with `timeouts { create = ... }` / `update`, "+
			"or look at `kubectl -n %s describe deployment %s`.", msg, timeout, opts.Namespace, config.OperatorName))
	}
	return applied, diags
}

// waitReady waits until the CRD is established and the Deployment available;
// it returns what is still missing when the context ends.
func (r *OperatorResource) waitReady(ctx context.Context, ns string) string {
	last := ""
	for {
		last = r.notReady(ctx, ns)
		if last == "" {
			return ""
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (r *OperatorResource) notReady(ctx context.Context, ns string) string {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := r.clients.kube.Get(ctx, client.ObjectKey{Name: nmv1beta1.CRDName}, crd); err != nil {
		return "the NodeMaintenance CRD cannot be read: " + err.Error()
	}
	established := false
	for _, c := range crd.Status.Conditions {
		established = established || c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
	}
	if !established {
		return "the NodeMaintenance CRD is not established yet"
	}
	dep := &appsv1.Deployment{}
	if err := r.clients.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: config.OperatorName}, dep); err != nil {
		return "the operator Deployment cannot be read: " + err.Error()
	}
	want := ptr.Deref(dep.Spec.Replicas, 1)
	s := dep.Status
	if s.ObservedGeneration < dep.Generation || s.UpdatedReplicas < want || s.AvailableReplicas < want || s.Replicas > want {
		return fmt.Sprintf("the operator Deployment %s/%s has %d of %d replicas updated and %d available", ns, config.OperatorName, s.UpdatedReplicas, want, s.AvailableReplicas)
	}
	return ""
}

// applyOptions are the options an apply installs: options() and the extra
// flags. With every attribute at its default they are
// config.DefaultOperatorOptions(), the installation deploy/ ships.
func (m *operatorResourceModel) applyOptions(ctx context.Context) (config.OperatorOptions, diag.Diagnostics) {
	opts := m.options()
	var extra []string
	diags := m.ExtraArgs.ElementsAs(ctx, &extra, false)
	opts.ExtraArgs = extra
	return opts, diags
}

func (m *operatorResourceModel) options() config.OperatorOptions {
	o := config.OperatorOptions{
		Namespace:            m.Namespace.ValueString(),
		Image:                m.Image.ValueString(),
		Replicas:             int32(m.Replicas.ValueInt64()),
		MaxUnavailable:       m.MaxUnavailable.ValueString(),
		MaxUnavailablePolicy: m.MaxUnavailablePolicy.ValueString(),
		AllowForceDrain:      m.AllowForce.ValueBool(),
		WebhookURL:           m.WebhookURL.ValueString(),
	}
	if ca := m.WebhookCA.ValueString(); ca != "" {
		o.WebhookCABundle = []byte(ca)
	}
	if o.Namespace == "" {
		o.Namespace = m.ID.ValueString()
	}
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for _, q := range []struct {
		value string
		list  corev1.ResourceList
		name  corev1.ResourceName
	}{
		{m.CPURequest.ValueString(), res.Requests, corev1.ResourceCPU},
		{m.MemoryRequest.ValueString(), res.Requests, corev1.ResourceMemory},
		{m.MemoryLimit.ValueString(), res.Limits, corev1.ResourceMemory},
	} {
		if v, err := k8sresource.ParseQuantity(q.value); err == nil && q.value != "" {
			q.list[q.name] = v
		}
	}
	o.Resources = res
	return o
}

func readResources(m *operatorResourceModel, r corev1.ResourceRequirements) {
	if q, ok := r.Requests[corev1.ResourceCPU]; ok {
		m.CPURequest = types.StringValue(q.String())
	}
	if q, ok := r.Requests[corev1.ResourceMemory]; ok {
		m.MemoryRequest = types.StringValue(q.String())
	}
	if q, ok := r.Limits[corev1.ResourceMemory]; ok {
		m.MemoryLimit = types.StringValue(q.String())
	}
}

func readArgs(m *operatorResourceModel, args []string) {
	m.AllowForce = types.BoolValue(false)
	m.MaxUnavailablePolicy = types.StringValue(nmvalidation.DefaultMaxUnavailablePolicy)
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--max-unavailable="); ok {
			m.MaxUnavailable = types.StringValue(v)
		}
		if v, ok := strings.CutPrefix(a, "--max-unavailable-policy="); ok {
			m.MaxUnavailablePolicy = types.StringValue(v)
		}
		if a == "--allow-force-drain" {
			m.AllowForce = types.BoolValue(true)
		}
	}
}

func objectName(obj client.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	if obj.GetNamespace() == "" {
		return kind + " " + obj.GetName()
	}
	return kind + " " + obj.GetNamespace() + "/" + obj.GetName()
}

func objectNames(objs []client.Object) types.List {
	vals := make([]attr.Value, 0, len(objs))
	for _, o := range objs {
		vals = append(vals, types.StringValue(objectName(o)))
	}
	return types.ListValueMust(types.StringType, vals)
}

// noMaintenances refuses to remove the operator while NodeMaintenances exist:
// without it their nodes would stay cordoned with nobody to restore them.
func (r *OperatorResource) noMaintenances(ctx context.Context, diags *diag.Diagnostics) bool {
	list := &nmv1beta1.NodeMaintenanceList{}
	err := r.clients.kube.List(ctx, list)
	switch {
	case err != nil && !isNoMatch(err):
		r.clients.apiError(diags, "Cannot Check for NodeMaintenances", "Listing NodeMaintenances before removing the operator", err)
		return false
	case err == nil && len(list.Items) > 0:
		var names []string
		for _, nm := range list.Items {
			names = append(names, fmt.Sprintf("%s (node %s)", nm.Name, nm.Spec.NodeName))
		}
		sort.Strings(names)
		diags.AddError("NodeMaintenances Still Exist", fmt.Sprintf(
			"The operator cannot be removed while NodeMaintenances exist: without it nobody restores their nodes. "+
				"Delete them first (destroy their nodemaintenance resources, or kubectl delete nm NAME) and wait until they are gone: %s.",
			strings.Join(names, ", ")))
		return false
	}
	return true
}

// remove deletes the objects in reverse order and waits until they are gone.
func (r *OperatorResource) remove(ctx context.Context, objs []client.Object, timeout time.Duration, diags *diag.Diagnostics) {
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for i := len(objs) - 1; i >= 0; i-- {
		obj := objs[i]
		if err := r.clients.kube.Delete(waitCtx, obj, client.PropagationPolicy("Foreground")); err != nil && !apierrors.IsNotFound(err) && !isNoMatch(err) {
			r.clients.apiError(diags, "Cannot Delete the Operator", fmt.Sprintf("Deleting %s", objectName(obj)), err)
			return
		}
	}
	for _, obj := range objs {
		for {
			err := r.clients.kube.Get(waitCtx, client.ObjectKeyFromObject(obj), obj)
			if apierrors.IsNotFound(err) || isNoMatch(err) {
				break
			}
			if waitCtx.Err() != nil {
				diags.AddError("Timed Out Removing the Operator", fmt.Sprintf(
					"%s still exists after %s. Look at it with kubectl, raise `timeouts { delete = ... }` (apply, then destroy again).", objectName(obj), timeout))
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}
