package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
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
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
)

var (
	_ resource.ResourceWithConfigure   = &OperatorResource{}
	_ resource.ResourceWithImportState = &OperatorResource{}
)

// fieldManager owns what the provider applies (server-side apply).
const fieldManager = "terraform-provider-nodemaintenance"

// NewOperatorResource is the constructor of the nodemaintenance_operator resource.
func NewOperatorResource() resource.Resource { return &OperatorResource{} }

// OperatorResource installs the bundled operator.
type OperatorResource struct {
	clients *clients
}

type operatorResourceModel struct {
	ID             types.String   `tfsdk:"id"`
	Namespace      types.String   `tfsdk:"namespace"`
	Image          types.String   `tfsdk:"image"`
	Replicas       types.Int64    `tfsdk:"replicas"`
	MaxUnavailable types.String   `tfsdk:"max_unavailable"`
	CPURequest     types.String   `tfsdk:"cpu_request"`
	MemoryRequest  types.String   `tfsdk:"memory_request"`
	MemoryLimit    types.String   `tfsdk:"memory_limit"`
	ExtraArgs      types.List     `tfsdk:"extra_args"`
	WebhookURL     types.String   `tfsdk:"webhook_url"`
	WebhookCA      types.String   `tfsdk:"webhook_ca_bundle"`
	Objects        types.List     `tfsdk:"objects"`
	Timeouts       timeouts.Value `tfsdk:"timeouts"`
}

// Metadata names the resource type.
func (r *OperatorResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_operator"
}

// Schema of the nodemaintenance_operator resource.
func (r *OperatorResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Installs the node-maintenance operator that does the cordon and drain: namespace, ServiceAccount, " +
			"RBAC generated from the operator's code, the `NodeMaintenance` CRD, the Deployment, Services and the validating " +
			"webhook (certificates issued in-cluster). Objects are server-side applied; create and update wait until the CRD is " +
			"established and the Deployment available. Destroy refuses while NodeMaintenances exist, then removes everything.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The namespace of the installation.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"namespace": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(config.DefaultNamespace),
				MarkdownDescription: "Namespace of the operator (a DNS-1123 label). Changing it replaces the installation.",
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:          namespaceValidators},
			"image": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(config.DefaultImage),
				MarkdownDescription: "Operator image (`make image` builds the default, `" + config.DefaultImage + "`)."},
			"replicas": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(config.DefaultReplicas),
				MarkdownDescription: "Replicas of the operator (0 or more); one leads, all serve the webhook.",
				Validators:          replicasValidators},
			"max_unavailable": schema.StringAttribute{Optional: true,
				MarkdownDescription: "Most nodes in maintenance at once, as a count (`2`) or a percentage of all nodes (`20%`), not negative. Unset: no limit.",
				Validators:          maxUnavailableValidators},
			"cpu_request": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(config.DefaultCPURequest),
				MarkdownDescription: "CPU request of the operator container, a Kubernetes quantity (`50m`).",
				Validators:          quantityValidators},
			"memory_request": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(config.DefaultMemoryRequest),
				MarkdownDescription: "Memory request of the operator container, a Kubernetes quantity (`64Mi`).",
				Validators:          quantityValidators},
			"memory_limit": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(config.DefaultMemoryLimit),
				MarkdownDescription: "Memory limit of the operator container, a Kubernetes quantity (`256Mi`).",
				Validators:          quantityValidators},
			"extra_args": schema.ListAttribute{Optional: true, ElementType: types.StringType,
				MarkdownDescription: "More operator flags, for example `[\"--lease-duration=30m\"]`."},
			"webhook_url": schema.StringAttribute{Optional: true,
				MarkdownDescription: "Send the validating webhook to this URL (for example `https://10.0.0.5:9443`) instead of the in-cluster " +
					"Service: for an operator that runs outside the cluster. Requires `webhook_ca_bundle`; usually with `replicas = 0`.",
				Validators: webhookURLValidators},
			"webhook_ca_bundle": schema.StringAttribute{Optional: true,
				MarkdownDescription: "PEM CA certificate that signed the certificate served at `webhook_url`. Requires `webhook_url`.",
				Validators:          webhookCAValidators},
			"objects": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				MarkdownDescription: "The objects of the installation, as `Kind namespace/name`."},
		},
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Update: true, Delete: true}),
		},
	}
}

// Configure receives the provider's clients.
func (r *OperatorResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.clients = configuredClients(req.ProviderData, &resp.Diagnostics)
}

// Create applies the installation and waits until it works.
func (r *OperatorResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan operatorResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if r.clients == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	timeout, d := plan.Timeouts.Create(ctx, 5*time.Minute)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	applied, diags := r.apply(ctx, &plan, timeout)
	resp.Diagnostics.Append(diags...)
	// Whatever was applied is kept in the state so that destroy removes it.
	if applied {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

// Read finds the installation by its Deployment; gone means removed from state.
func (r *OperatorResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state operatorResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if r.clients == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	ns := state.ID.ValueString()
	dep := &appsv1.Deployment{}
	if err := r.clients.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: config.OperatorName}, dep); err != nil {
		if apierrors.IsNotFound(err) {
			resp.State.RemoveResource(ctx)
			return
		}
		r.clients.apiError(&resp.Diagnostics, "Cannot Read the Operator", fmt.Sprintf("Reading Deployment %s/%s", ns, config.OperatorName), err)
		return
	}
	state.Namespace = types.StringValue(ns)
	state.Replicas = types.Int64Value(int64(ptr.Deref(dep.Spec.Replicas, 1)))
	if cs := dep.Spec.Template.Spec.Containers; len(cs) > 0 {
		state.Image = types.StringValue(cs[0].Image)
		readResources(&state, cs[0].Resources)
		readArgs(&state, cs[0].Args)
	}
	if state.Objects.IsNull() || state.Objects.IsUnknown() {
		objs, err := config.OperatorObjects(state.options())
		if err == nil {
			state.Objects = objectNames(objs)
		}
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update applies the changed installation (image, replicas, flags) in place.
func (r *OperatorResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan operatorResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if r.clients == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	timeout, d := plan.Timeouts.Update(ctx, 5*time.Minute)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	_, diags := r.apply(ctx, &plan, timeout)
	resp.Diagnostics.Append(diags...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Delete refuses while NodeMaintenances exist (removing the operator would
// leave their nodes cordoned with nobody to restore them), then deletes every
// object in reverse order and waits until they are gone.
func (r *OperatorResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state operatorResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if r.clients == nil {
		notConfigured(&resp.Diagnostics)
		return
	}
	timeout, d := state.Timeouts.Delete(ctx, 5*time.Minute)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	list := &nmv1beta1.NodeMaintenanceList{}
	err := r.clients.kube.List(ctx, list)
	switch {
	case err != nil && !isNoMatch(err):
		r.clients.apiError(&resp.Diagnostics, "Cannot Check for NodeMaintenances", "Listing NodeMaintenances before removing the operator", err)
		return
	case err == nil && len(list.Items) > 0:
		var names []string
		for _, nm := range list.Items {
			names = append(names, fmt.Sprintf("%s (node %s)", nm.Name, nm.Spec.NodeName))
		}
		sort.Strings(names)
		resp.Diagnostics.AddError("NodeMaintenances Still Exist", fmt.Sprintf(
			"The operator cannot be removed while NodeMaintenances exist: without it nobody restores their nodes. "+
				"Delete them first (destroy their nodemaintenance resources, or kubectl delete nm NAME) and wait until they are gone: %s.",
			strings.Join(names, ", ")))
		return
	}
	objs, err := config.OperatorObjects(state.options())
	if err != nil {
		resp.Diagnostics.AddError("Cannot Render the Operator Installation", err.Error())
		return
	}
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for i := len(objs) - 1; i >= 0; i-- {
		obj := objs[i]
		if err := r.clients.kube.Delete(waitCtx, obj, client.PropagationPolicy("Foreground")); err != nil && !apierrors.IsNotFound(err) && !isNoMatch(err) {
			r.clients.apiError(&resp.Diagnostics, "Cannot Delete the Operator", fmt.Sprintf("Deleting %s", objectName(obj)), err)
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
				resp.Diagnostics.AddError("Timed Out Removing the Operator", fmt.Sprintf(
					"%s still exists after %s. Look at it with kubectl, raise `timeouts { delete = ... }` (apply, then destroy again).", objectName(obj), timeout))
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// ImportState imports an installation by its namespace.
func (r *OperatorResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), req.ID)...)
}

// apply server-side applies every object and waits for the CRD and the
// Deployment. It reports whether anything was applied.
func (r *OperatorResource) apply(ctx context.Context, plan *operatorResourceModel, timeout time.Duration) (bool, diag.Diagnostics) {
	var diags diag.Diagnostics
	opts := plan.options()
	var extra []string
	diags.Append(plan.ExtraArgs.ElementsAs(ctx, &extra, false)...)
	opts.ExtraArgs = extra
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

func (m *operatorResourceModel) options() config.OperatorOptions {
	o := config.OperatorOptions{
		Namespace:      m.Namespace.ValueString(),
		Image:          m.Image.ValueString(),
		Replicas:       int32(m.Replicas.ValueInt64()),
		MaxUnavailable: m.MaxUnavailable.ValueString(),
		WebhookURL:     m.WebhookURL.ValueString(),
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
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--max-unavailable="); ok {
			m.MaxUnavailable = types.StringValue(v)
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
