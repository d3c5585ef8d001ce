// This file is a little over 400 lines: it is the nodemaintenance resource's CRUD (create, read, update, delete,
// import) and their waits, which read best together; schema, model and plan live in files of their own.

package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

var (
	_ resource.Resource                = &NodeMaintenanceResource{}
	_ resource.ResourceWithConfigure   = &NodeMaintenanceResource{}
	_ resource.ResourceWithImportState = &NodeMaintenanceResource{}
	_ resource.ResourceWithModifyPlan  = &NodeMaintenanceResource{}
)

const (
	defaultCreateTimeout = 20 * time.Minute
	defaultDeleteTimeout = 10 * time.Minute
	// namePrefix makes the default name of a maintenance from its node, as in
	// the spec's example (maintain-node02).
	namePrefix = "maintain-"
)

// NewNodeMaintenanceResource is the constructor of the nodemaintenance resource.
func NewNodeMaintenanceResource() resource.Resource { return &NodeMaintenanceResource{} }

// NodeMaintenanceResource manages one NodeMaintenance.
type NodeMaintenanceResource struct {
	clients *clients
}

type nodeMaintenanceResourceModel struct {
	ID       types.String   `tfsdk:"id"`
	Name     types.String   `tfsdk:"name"`
	NodeName types.String   `tfsdk:"node_name"`
	Reason   types.String   `tfsdk:"reason"`
	Drain    types.Object   `tfsdk:"drain"`
	Timeouts timeouts.Value `tfsdk:"timeouts"`
	statusModel
}

// Metadata names the resource type.
func (r *NodeMaintenanceResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName
}

// Schema of the nodemaintenance resource.
func (r *NodeMaintenanceResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	attrs := map[string]schema.Attribute{
		"id": schema.StringAttribute{Computed: true, MarkdownDescription: "Name of the NodeMaintenance.",
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		"name": schema.StringAttribute{Optional: true, Computed: true,
			MarkdownDescription: "Name of the NodeMaintenance object: a DNS-1123 subdomain (at most 253 lowercase letters, digits, `-` and `.`). " +
				"Defaults to `maintain-<node_name>`. Changing it replaces the resource.",
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace(), stringplanmodifier.UseStateForUnknown()},
			Validators:    maintenanceNameValidators},
		"node_name": schema.StringAttribute{Required: true,
			MarkdownDescription: "Node to put into maintenance: the name of an existing node, a DNS-1123 subdomain of 1 to 253 lowercase " +
				"letters, digits, `-` and `.`. Changing it replaces the resource: the old node is restored, then the new one drained.",
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			Validators:    nodeNameValidators},
		"reason": schema.StringAttribute{Optional: true,
			MarkdownDescription: "Why the node is in maintenance: free text of at most 1024 characters (counted as characters, not bytes, " +
				"like the CRD's `spec.reason`). Updated in place.",
			Validators: reasonValidators},
		"drain": drainAttribute(),
	}
	resourceStatusAttributes(attrs)
	resp.Schema = schema.Schema{
		MarkdownDescription: "Puts a node into maintenance: creates a `NodeMaintenance` and waits until the operator has " +
			"cordoned and drained the node (phase `Succeeded`). A `Failed` maintenance is an error, and the resource stays in " +
			"the state as tainted so `destroy` can restore the node. Destroy deletes the `NodeMaintenance` and waits until the " +
			"node is restored exactly as it was.",
		Attributes: attrs,
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Delete: true,
				CreateDescription: "How long to wait for the drain to finish (default 20m).",
				DeleteDescription: "How long to wait for the node to be restored (default 10m)."}),
		},
	}
}

// Configure receives the provider's clients.
func (r *NodeMaintenanceResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.clients = configuredClients(req.ProviderData, &resp.Diagnostics)
}

// ModifyPlan derives the default name from the node, so the plan shows the
// object that will be created.
func (r *NodeMaintenanceResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan nodeMaintenanceResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var configName types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("name"), &configName)...)
	if configName.IsNull() && !plan.NodeName.IsUnknown() && !plan.NodeName.IsNull() {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("name"), types.StringValue(namePrefix+plan.NodeName.ValueString()))...)
	}
	if r.creates(ctx, req, plan, configName, &resp.Diagnostics) {
		// What the drain will do, as warnings; a plan never fails on it.
		previewWarnings(ctx, r.clients, plan.NodeName.ValueString(), plan.Drain, &resp.Diagnostics)
	}
	// A maintenance the operator has not finished (an apply interrupted while
	// it waited, or one imported mid-drain) is not what the configuration
	// asks for yet: plan an update, and the update waits for the drain.
	if req.State.Raw.IsNull() {
		return
	}
	var state nodeMaintenanceResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !state.inProgress() {
		return
	}
	status, diags := unknownStatus(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.statusModel = status
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// creates reports whether the plan creates a NodeMaintenance: a new
// resource (a tainted one is planned as one), or a replacement because the
// name, the node or the drain block changes.
func (r *NodeMaintenanceResource) creates(ctx context.Context, req resource.ModifyPlanRequest, plan nodeMaintenanceResourceModel, configName types.String, diags *diag.Diagnostics) bool {
	if req.State.Raw.IsNull() {
		return true
	}
	var state nodeMaintenanceResourceModel
	if d := req.State.Get(ctx, &state); d.HasError() {
		diags.Append(d...)
		return false
	}
	name := configName
	if name.IsNull() {
		name = types.StringValue(namePrefix + plan.NodeName.ValueString())
	}
	return !plan.NodeName.Equal(state.NodeName) || !plan.Drain.Equal(state.Drain) || (!name.IsUnknown() && !name.Equal(state.Name))
}

// Create creates the NodeMaintenance and waits until the drain has finished.
func (r *NodeMaintenanceResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan nodeMaintenanceResourceModel
	timeout, ok := begin(ctx, r.clients, &resp.Diagnostics, createTimeout(defaultCreateTimeout), read(req.Plan, &plan))
	if !ok {
		return
	}
	name := plan.Name.ValueString()
	policy, diags := drainPolicy(ctx, plan.Drain)
	if resp.Diagnostics.Append(diags...); diags.HasError() {
		return
	}
	nm := &nmv1beta1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       nmv1beta1.NodeMaintenanceSpec{NodeName: plan.NodeName.ValueString(), Reason: plan.Reason.ValueString(), Drain: policy},
	}
	if err := r.clients.kube.Create(ctx, nm); err != nil {
		r.clients.apiError(&resp.Diagnostics, "Cannot Create NodeMaintenance",
			fmt.Sprintf("Creating NodeMaintenance %q for node %q", name, plan.NodeName.ValueString()), err)
		return
	}
	tflog.Info(ctx, fmt.Sprintf("NodeMaintenance %s created for node %s; waiting up to %s for the drain (time queued behind other maintenances under max_unavailable counts)", name, nm.Spec.NodeName, timeout))
	plan.ID = types.StringValue(name)
	setIdentity(ctx, resp.Identity, name, &resp.Diagnostics)

	got, deleted := r.awaitDrain(ctx, name, timeout, &resp.Diagnostics, "apply")
	if deleted {
		return // nothing to keep in the state; awaitDrain said why
	}
	if got != nil {
		nm = got
	}
	if restoredOnTimeout(nm) {
		// The operator gave up cleanly (spec.drain.onTimeout Restore): the
		// node is back as it was, and a tainted resource would only
		// restore it again. The NodeMaintenance is the record of what
		// happened, quoted in the error; it goes, and the next apply tries
		// again.
		r.removeRestored(ctx, nm, &resp.Diagnostics)
		return
	}
	resp.Diagnostics.Append(plan.setStatus(ctx, nm)...)
	// The object exists whatever happened, even when the wait never read it
	// back: keep it in the state so that Terraform can destroy it (and
	// restore the node) instead of orphaning it.
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// awaitDrain waits up to timeout until the operator has finished the
// maintenance, adds what went wrong to diags, and returns the last object
// seen (nil when the wait never read it) and whether it was seen deleted
// meanwhile. An interrupted wait (Ctrl-C, a CI job cancelled) is only a
// warning: the maintenance goes on in the cluster, stays in the state
// untainted, and the next apply plans an update that waits for it.
func (r *NodeMaintenanceResource) awaitDrain(ctx context.Context, name string, timeout time.Duration, diags *diag.Diagnostics, op string) (got *nmv1beta1.NodeMaintenance, deleted bool) {
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	got, err := waitFor(waitCtx, r.clients.kube, name, finished, func(nm *nmv1beta1.NodeMaintenance) {
		tflog.Info(ctx, progressLine(name, nm))
	})
	// waitFor returns nil with an error when it could not read the object at
	// all; only nil without one means it is gone.
	deleted = err == nil && got == nil
	switch {
	case err != nil && ctx.Err() != nil:
		diags.AddWarning("Interrupted While Waiting for the Node to Drain", interruptedDetail(name, got))
	case err != nil && queuedBehind(got) != "":
		diags.AddError("Timed Out Waiting in the Maintenance Queue", timeoutDetail(name, got, timeout, err))
	case err != nil:
		diags.AddError("Timed Out Waiting for the Node to Drain", timeoutDetail(name, got, timeout, err))
	case deleted:
		diags.AddError("NodeMaintenance Deleted While Waiting",
			fmt.Sprintf("NodeMaintenance %q was deleted by someone else before the drain finished; the node was restored by the operator.", name))
	case restoredOnTimeout(got):
		// The caller says so (removeRestored).
	case got.Status.Phase == nmv1beta1.MaintenanceFailed:
		diags.AddError("Node Maintenance Failed", failedDetail(got, op))
	}
	return got, deleted
}

// Read refreshes the status; a NodeMaintenance deleted out of band is removed
// from the state so the next apply creates it again.
func (r *NodeMaintenanceResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state nodeMaintenanceResourceModel
	if _, ok := begin(ctx, r.clients, &resp.Diagnostics, nil, read(req.State, &state)); !ok {
		return
	}
	name := state.ID.ValueString()
	nm := &nmv1beta1.NodeMaintenance{}
	if err := r.clients.kube.Get(ctx, client.ObjectKey{Name: name}, nm); err != nil {
		if apierrors.IsNotFound(err) {
			tflog.Warn(ctx, fmt.Sprintf("NodeMaintenance %s no longer exists; removing it from the state", name))
			resp.State.RemoveResource(ctx)
			// The framework wants an identity after every read, a removal
			// included; a CLI without identities (OpenTofu) stored none.
			setIdentity(ctx, resp.Identity, name, &resp.Diagnostics)
			return
		}
		r.clients.apiError(&resp.Diagnostics, "Cannot Read NodeMaintenance", fmt.Sprintf("Reading NodeMaintenance %q", name), err)
		return
	}
	state.Name = types.StringValue(nm.Name)
	state.NodeName = types.StringValue(nm.Spec.NodeName)
	drain, diags := drainBlock(ctx, nm.Spec.Drain, state.Drain)
	resp.Diagnostics.Append(diags...)
	state.Drain = drain
	if nm.Spec.Reason != "" || !state.Reason.IsNull() {
		state.Reason = types.StringValue(nm.Spec.Reason)
	}
	resp.Diagnostics.Append(state.setStatus(ctx, nm)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
	setIdentity(ctx, resp.Identity, nm.Name, &resp.Diagnostics)
}

// Update changes the reason in place (the node cannot change: that replaces).
func (r *NodeMaintenanceResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state nodeMaintenanceResourceModel
	if _, ok := begin(ctx, r.clients, &resp.Diagnostics, nil, read(req.Plan, &plan), read(req.State, &state)); !ok {
		return
	}
	name := state.ID.ValueString()
	nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}}
	patch := []byte(fmt.Sprintf(`{"spec":{"reason":%q}}`, plan.Reason.ValueString()))
	if err := r.clients.kube.Patch(ctx, nm, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		r.clients.apiError(&resp.Diagnostics, "Cannot Update NodeMaintenance", fmt.Sprintf("Updating the reason of NodeMaintenance %q", name), err)
		return
	}
	plan.ID = state.ID
	setIdentity(ctx, resp.Identity, name, &resp.Diagnostics)
	if !state.inProgress() {
		// The status stays as planned (the prior state's); the next refresh reads it.
		plan.statusModel = state.statusModel
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
		return
	}
	// The drain was not finished (ModifyPlan planned this update): wait for it
	// as create would, within the create timeout.
	timeout, ok := createTimeout(defaultCreateTimeout).read(ctx, &resp.Diagnostics, &plan)
	if !ok {
		return
	}
	tflog.Info(ctx, fmt.Sprintf("NodeMaintenance %s is still %s; waiting up to %s for the drain", name, state.Phase.ValueString(), timeout))
	got, deleted := r.awaitDrain(ctx, name, timeout, &resp.Diagnostics, "update")
	switch {
	case deleted:
		resp.State.RemoveResource(ctx)
		return
	case got != nil && restoredOnTimeout(got):
		r.removeRestored(ctx, got, &resp.Diagnostics)
		resp.State.RemoveResource(ctx)
		return
	case got == nil:
		// Never read back (interrupted at once): keep the last known status.
		plan.statusModel = state.statusModel
	default:
		resp.Diagnostics.Append(plan.setStatus(ctx, got)...)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Delete deletes the NodeMaintenance and waits until it is gone: the operator
// has restored the node and removed its finalizer.
func (r *NodeMaintenanceResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state nodeMaintenanceResourceModel
	timeout, ok := begin(ctx, r.clients, &resp.Diagnostics, deleteTimeout(defaultDeleteTimeout), read(req.State, &state))
	if !ok {
		return
	}
	name := state.ID.ValueString()
	err := r.clients.kube.Delete(ctx, &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil && ctx.Err() != nil { // interrupted during the request: the deletion may have gone through
		interruptedRestore(&resp.Diagnostics, name, state.NodeName.ValueString())
		return
	}
	if err != nil {
		r.clients.apiError(&resp.Diagnostics, "Cannot Delete NodeMaintenance", fmt.Sprintf("Deleting NodeMaintenance %q", name), err)
		return
	}
	tflog.Info(ctx, fmt.Sprintf("NodeMaintenance %s deleted; waiting up to %s for node %s to be restored", name, timeout, state.NodeName.ValueString()))
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err = waitFor(waitCtx, r.clients.kube, name, gone, nil)
	if err != nil && ctx.Err() != nil {
		interruptedRestore(&resp.Diagnostics, name, state.NodeName.ValueString())
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Timed Out Waiting for the Node to Be Restored", fmt.Sprintf(
			"NodeMaintenance %q still exists after %s (%v): its finalizer %q has not been removed, so node %q may not be restored yet. "+
				"Check that the node-maintenance operator is running and look at `kubectl describe nm %s`. "+
				"To wait longer, set `timeouts { delete = \"30m\" }`, run apply (destroy uses the timeout stored in the state), then destroy again.",
			name, timeout, err, nmv1beta1.NodeMaintenanceFinalizer, state.NodeName.ValueString(), name))
		return
	}
	tflog.Info(ctx, fmt.Sprintf("NodeMaintenance %s is gone; node %s is restored", name, state.NodeName.ValueString()))
}

// interruptedRestore says what an interrupted destroy left: a maintenance
// being deleted (or about to be), which stays in the state.
func interruptedRestore(diags *diag.Diagnostics, name, node string) {
	diags.AddError("Interrupted While Waiting for the Node to Be Restored", fmt.Sprintf(
		"NodeMaintenance %q is being deleted and the operator restores node %q, but destroy was interrupted before it was gone. "+
			"It stays in the state: run destroy again to wait until the node is restored.", name, node))
}

func (m *nodeMaintenanceResourceModel) setStatus(ctx context.Context, nm *nmv1beta1.NodeMaintenance) diag.Diagnostics {
	s, diags := statusFrom(ctx, nm.Status)
	m.statusModel = s
	return diags
}

// restoredOnTimeout reports whether the operator restored the node when the
// drain timed out (spec.drain.onTimeout Restore): Failed, not cordoned any
// more.
func restoredOnTimeout(nm *nmv1beta1.NodeMaintenance) bool {
	c := meta.FindStatusCondition(nm.Status.Conditions, nmv1beta1.ConditionCordoned)
	return nm.Status.Phase == nmv1beta1.MaintenanceFailed && c != nil && c.Reason == nmv1beta1.ReasonRestored &&
		nm.Spec.Drain != nil && nm.Spec.Drain.OnTimeout == nmv1beta1.DrainTimeoutRestore
}

// removeRestored deletes the NodeMaintenance of a maintenance the operator
// ended by restoring the node, and says so next to the failure awaitDrain
// reported. The resource is not kept in the state.
func (r *NodeMaintenanceResource) removeRestored(ctx context.Context, nm *nmv1beta1.NodeMaintenance, diags *diag.Diagnostics) {
	err := r.clients.kube.Delete(ctx, &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: nm.Name}})
	if err != nil && !apierrors.IsNotFound(err) {
		r.clients.apiError(diags, "Cannot Delete the Restored NodeMaintenance",
			fmt.Sprintf("Node %q was restored when its drain timed out, but deleting NodeMaintenance %q failed; delete it with kubectl delete nm %s", nm.Spec.NodeName, nm.Name, nm.Name), err)
		return
	}
	// The operator lets it go at once (the node is restored already); the
	// next apply creates one of the same name, so wait for that.
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := waitFor(waitCtx, r.clients.kube, nm.Name, gone, nil); err != nil {
		diags.AddWarning("Restored NodeMaintenance Not Gone Yet", fmt.Sprintf(
			"NodeMaintenance %q was deleted but is still there a minute later (%v); the next apply may find it. Check that the operator runs.", nm.Name, err))
	}
	diags.AddError("Node Restored After the Drain Timed Out", fmt.Sprintf(
		"The drain of node %q did not finish within drain.timeout, and the operator restored the node to its state from before the "+
			"maintenance, as on_timeout = \"Restore\" asks. NodeMaintenance %q was deleted and the resource is not kept in the state: "+
			"the next apply tries the maintenance again. What blocked the drain: %s", nm.Spec.NodeName, nm.Name, nm.Status.LastError))
}
