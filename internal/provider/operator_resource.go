package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
)

var (
	_ resource.ResourceWithConfigure   = &OperatorResource{}
	_ resource.ResourceWithImportState = &OperatorResource{}
)

const (
	// fieldManager owns what the provider applies (server-side apply).
	fieldManager = "terraform-provider-nodemaintenance"
	// defaultOperatorTimeout bounds create, update and delete unless the
	// timeouts block says otherwise.
	defaultOperatorTimeout = 5 * time.Minute
)

// NewOperatorResource is the constructor of the nodemaintenance_operator resource.
func NewOperatorResource() resource.Resource { return &OperatorResource{} }

// OperatorResource installs the bundled operator.
type OperatorResource struct {
	clients *clients
}

type operatorResourceModel struct {
	ID                   types.String   `tfsdk:"id"`
	Namespace            types.String   `tfsdk:"namespace"`
	Image                types.String   `tfsdk:"image"`
	Replicas             types.Int64    `tfsdk:"replicas"`
	MaxUnavailable       types.String   `tfsdk:"max_unavailable"`
	MaxUnavailablePolicy types.String   `tfsdk:"max_unavailable_policy"`
	AllowForce           types.Bool     `tfsdk:"allow_force_drain"`
	CPURequest           types.String   `tfsdk:"cpu_request"`
	MemoryRequest        types.String   `tfsdk:"memory_request"`
	MemoryLimit          types.String   `tfsdk:"memory_limit"`
	ExtraArgs            types.List     `tfsdk:"extra_args"`
	WebhookURL           types.String   `tfsdk:"webhook_url"`
	WebhookCA            types.String   `tfsdk:"webhook_ca_bundle"`
	Objects              types.List     `tfsdk:"objects"`
	Timeouts             timeouts.Value `tfsdk:"timeouts"`
}

// Metadata names the resource type.
func (r *OperatorResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_operator"
}

// Configure receives the provider's clients.
func (r *OperatorResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.clients = configuredClients(req.ProviderData, &resp.Diagnostics)
}

// Create applies the installation and waits until it works.
func (r *OperatorResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan operatorResourceModel
	timeout, ok := begin(ctx, r.clients, &resp.Diagnostics, createTimeout(defaultOperatorTimeout), read(req.Plan, &plan))
	if !ok {
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
	if _, ok := begin(ctx, r.clients, &resp.Diagnostics, nil, read(req.State, &state)); !ok {
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
	timeout, ok := begin(ctx, r.clients, &resp.Diagnostics, updateTimeout(defaultOperatorTimeout), read(req.Plan, &plan))
	if !ok {
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
	timeout, ok := begin(ctx, r.clients, &resp.Diagnostics, deleteTimeout(defaultOperatorTimeout), read(req.State, &state))
	if !ok || !r.noMaintenances(ctx, &resp.Diagnostics) {
		return
	}
	objs, err := config.OperatorObjects(state.options())
	if err != nil {
		resp.Diagnostics.AddError("Cannot Render the Operator Installation", err.Error())
		return
	}
	r.remove(ctx, objs, timeout, &resp.Diagnostics)
}

// ImportState imports an installation by its namespace.
func (r *OperatorResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), req.ID)...)
}
