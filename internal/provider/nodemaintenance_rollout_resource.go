package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

var (
	_ resource.Resource                     = &RolloutResource{}
	_ resource.ResourceWithConfigure        = &RolloutResource{}
	_ resource.ResourceWithImportState      = &RolloutResource{}
	_ resource.ResourceWithModifyPlan       = &RolloutResource{}
	_ resource.ResourceWithConfigValidators = &RolloutResource{}
)

// NewRolloutResource is the constructor of the nodemaintenance_rollout resource.
func NewRolloutResource() resource.Resource { return &RolloutResource{} }

// RolloutResource manages one NodeMaintenanceRollout.
type RolloutResource struct {
	clients *clients
}

// Metadata names the resource type.
func (r *RolloutResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_rollout"
}

// Configure receives the provider's clients.
func (r *RolloutResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.clients = configuredClients(req.ProviderData, &resp.Diagnostics)
}

// ConfigValidators of the nodemaintenance_rollout resource.
func (r *RolloutResource) ConfigValidators(context.Context) []resource.ConfigValidator {
	return []resource.ConfigValidator{positiveTimeouts{"create", "update", "delete"}, validDrain{}, validRollout{}}
}

// ModifyPlan shows, for a rollout about to be created, its node set, its
// waves and what would block each node's drain; for an update, or a
// rollout the operator has not finished (an apply interrupted while it
// waited), it plans the status as unknown: the apply waits and reads it.
func (r *RolloutResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan rolloutResourceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if req.State.Raw.IsNull() {
		rolloutPlanPreview(ctx, r.clients, plan.rolloutSpecModel, &resp.Diagnostics)
		return
	}
	var state rolloutResourceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || (req.Plan.Raw.Equal(req.State.Raw) && !state.unsettled(plan.goal())) {
		return
	}
	status, diags := unknownRolloutStatus(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.rolloutStatusModel = status
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// unsettled tells whether a status in the state is of a rollout an apply
// would still wait for: not picked up yet, or in a phase the goal does not
// wait for (Progressing, unless wait_for_completion is false; Paused, when
// the configuration no longer pauses it).
func (s rolloutStatusModel) unsettled(goal rolloutGoal) bool {
	return !goal.reached(nmv1alpha1.RolloutPhase(s.Phase.ValueString()))
}

// Create creates the rollout and waits until it succeeded (or, created
// paused or with wait_for_completion = false, until its node set is
// resolved).
func (r *RolloutResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan rolloutResourceModel
	timeout, ok := begin(ctx, r.clients, &resp.Diagnostics, createTimeout(defaultRolloutCreateTimeout), read(req.Plan, &plan))
	if !ok {
		return
	}
	name := plan.Name.ValueString()
	spec, diags := plan.spec(ctx)
	if resp.Diagnostics.Append(diags...); diags.HasError() {
		return
	}
	obj := &rollout{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	if err := r.clients.kube.Create(ctx, obj); err != nil {
		r.clients.rolloutAPIError(&resp.Diagnostics, "Cannot Create NodeMaintenanceRollout", fmt.Sprintf("Creating NodeMaintenanceRollout %q", name), err)
		return
	}
	tflog.Info(ctx, fmt.Sprintf("NodeMaintenanceRollout %s created; waiting up to %s for it to %s", name, timeout, plan.goal()))
	plan.ID = types.StringValue(name)
	got, deleted := r.await(ctx, name, plan.goal(), timeout, &resp.Diagnostics, "create")
	if deleted {
		return // nothing to keep in the state; await said why
	}
	// The object exists whatever happened: keep it in the state so that
	// Terraform can destroy it (and restore its nodes) instead of orphaning it.
	resp.Diagnostics.Append(plan.setStatus(ctx, got)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// await waits up to timeout until the rollout reached the goal (rolloutSettled),
// logging the progress timeline, adds what went wrong to diags, and returns
// the last object seen (nil when never read) and whether it was deleted
// meanwhile. An interrupted wait is only a warning: the rollout goes on.
func (r *RolloutResource) await(ctx context.Context, name string, goal rolloutGoal, timeout time.Duration, diags *diag.Diagnostics, op string) (got *rollout, deleted bool) {
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	timeline := newRolloutTimeline(name)
	got, err := waitForObject(waitCtx, r.clients.kube, rollouts, name, rolloutSettled(goal), func(o *rollout) {
		for _, line := range timeline.lines(o) {
			tflog.Info(ctx, line)
		}
	})
	deleted = err == nil && got == nil
	switch {
	case err != nil && ctx.Err() != nil:
		diags.AddWarning("Interrupted While Waiting for the Rollout", rolloutInterruptedDetail(name, got))
	case err != nil:
		diags.AddError("Timed Out Waiting for the Rollout", rolloutTimeoutDetail(name, got, timeout, err))
	case deleted:
		diags.AddError("NodeMaintenanceRollout Deleted While Waiting", fmt.Sprintf(
			"NodeMaintenanceRollout %q was deleted by someone else before it finished; the operator restores the nodes it held. "+
				"The next apply creates it again.", name))
	case got.Status.Phase == nmv1alpha1.RolloutHalted:
		diags.AddError("Node Maintenance Rollout Halted", haltedDetail(got, op))
	}
	return got, deleted
}

// setStatus sets the status from the rollout; nil (never read) is an empty
// status, so that the state holds no unknown value.
func (m *rolloutResourceModel) setStatus(ctx context.Context, r *rollout) diag.Diagnostics {
	var s rolloutStatus
	if r != nil {
		s = r.Status
	}
	status, diags := rolloutStatusFrom(ctx, s)
	m.rolloutStatusModel = status
	return diags
}

// Read refreshes the spec and the status; a rollout deleted out of band is
// removed from the state so that the next apply creates it again.
func (r *RolloutResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state rolloutResourceModel
	if _, ok := begin(ctx, r.clients, &resp.Diagnostics, nil, read(req.State, &state)); !ok {
		return
	}
	name := state.ID.ValueString()
	obj := &rollout{}
	if err := r.clients.kube.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			tflog.Warn(ctx, fmt.Sprintf("NodeMaintenanceRollout %s no longer exists; removing it from the state", name))
			resp.State.RemoveResource(ctx)
			return
		}
		r.clients.rolloutAPIError(&resp.Diagnostics, "Cannot Read NodeMaintenanceRollout", fmt.Sprintf("Reading NodeMaintenanceRollout %q", name), err)
		return
	}
	state.Name = types.StringValue(obj.Name)
	resp.Diagnostics.Append(state.readSpec(ctx, obj.Spec)...)
	resp.Diagnostics.Append(state.setStatus(ctx, obj)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update writes what can change in place (setInPlace: everything but the
// node set, the drain and the step), then waits as create does.
func (r *RolloutResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state rolloutResourceModel
	timeout, ok := begin(ctx, r.clients, &resp.Diagnostics, updateTimeout(defaultRolloutCreateTimeout), read(req.Plan, &plan), read(req.State, &state))
	if !ok {
		return
	}
	name := state.ID.ValueString()
	spec, diags := plan.spec(ctx)
	if resp.Diagnostics.Append(diags...); diags.HasError() {
		return
	}
	if err := r.updateInPlace(ctx, name, spec); err != nil {
		r.clients.rolloutAPIError(&resp.Diagnostics, "Cannot Update NodeMaintenanceRollout", fmt.Sprintf("Updating NodeMaintenanceRollout %q", name), err)
		return
	}
	plan.ID = state.ID
	tflog.Info(ctx, fmt.Sprintf("NodeMaintenanceRollout %s updated; waiting up to %s for it to %s", name, timeout, plan.goal()))
	got, deleted := r.await(ctx, name, plan.goal(), timeout, &resp.Diagnostics, "update")
	switch {
	case deleted:
		resp.State.RemoveResource(ctx)
		return
	case got == nil:
		plan.rolloutStatusModel = state.rolloutStatusModel // never read back: the last known
	default:
		resp.Diagnostics.Append(plan.setStatus(ctx, got)...)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// setInPlace copies the spec fields that change in place from src to dst;
// the others (the node set, the drain, the step) stay as dst has them.
func setInPlace(dst *nmv1alpha1.NodeMaintenanceRolloutSpec, src nmv1alpha1.NodeMaintenanceRolloutSpec) {
	dst.MaxUnavailable, dst.Paused, dst.Reason, dst.HoldFor, dst.SoakFor = src.MaxUnavailable, src.Paused, src.Reason, src.HoldFor, src.SoakFor
	dst.OnFailure, dst.MaxFailures = src.OnFailure, src.MaxFailures
	dst.RecoveryGate, dst.RecoveryTimeout, dst.Gates, dst.Window, dst.Notify = src.RecoveryGate, src.RecoveryTimeout, src.Gates, src.Window, src.Notify
}

// updateInPlace reads the rollout and writes the fields that change in
// place, again on a conflict (the operator writes its finalizer).
func (r *RolloutResource) updateInPlace(ctx context.Context, name string, spec nmv1alpha1.NodeMaintenanceRolloutSpec) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		obj := &rollout{}
		if err := r.clients.kube.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return err
		}
		setInPlace(&obj.Spec, spec)
		return r.clients.kube.Update(ctx, obj)
	})
}

// Delete deletes the rollout and waits until it is gone: the operator has
// restored every node it held and removed its finalizer.
func (r *RolloutResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state rolloutResourceModel
	timeout, ok := begin(ctx, r.clients, &resp.Diagnostics, deleteTimeout(defaultRolloutDeleteTimeout), read(req.State, &state))
	if !ok {
		return
	}
	name := state.ID.ValueString()
	err := r.clients.kube.Delete(ctx, &rollout{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		r.clients.rolloutAPIError(&resp.Diagnostics, "Cannot Delete NodeMaintenanceRollout", fmt.Sprintf("Deleting NodeMaintenanceRollout %q", name), err)
		return
	}
	tflog.Info(ctx, fmt.Sprintf("NodeMaintenanceRollout %s deleted; waiting up to %s for its nodes to be restored", name, timeout))
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	timeline := newRolloutTimeline(name)
	got, err := waitForObject(waitCtx, r.clients.kube, rollouts, name, func(o *rollout) bool { return o == nil }, func(o *rollout) {
		for _, line := range timeline.lines(o) {
			tflog.Info(ctx, line)
		}
	})
	if err != nil {
		where := "it was not seen"
		if got != nil {
			where = "nodes still held: " + inFlight(got)
		}
		resp.Diagnostics.AddError("Timed Out Waiting for the Rollout's Nodes to Be Restored", fmt.Sprintf(
			"NodeMaintenanceRollout %q is deleted but still there after %s (%v): %s. The operator removes its finalizer %s once every "+
				"node it holds is restored; check that the operator runs (`kubectl get nm -l %s=%s` shows the nodes' maintenances), "+
				"raise `timeouts { delete = \"1h\" }` and apply it (destroy uses the timeout stored in the state), then destroy again.",
			name, timeout, err, where, nmv1alpha1.RolloutFinalizer, nmv1alpha1.RolloutLabel, name))
		return
	}
	tflog.Info(ctx, fmt.Sprintf("NodeMaintenanceRollout %s is gone; its nodes are restored", name))
}

// ImportState imports a rollout by name.
func (r *RolloutResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
	// Not part of the rollout: an imported one is waited for, as by default.
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("wait_for_completion"), true)...)
}

// rolloutAPIError is apiError for a request about a rollout: a cluster
// whose operator predates rollouts, and RBAC without them, get their own
// advice.
func (c *clients) rolloutAPIError(diags *diag.Diagnostics, summary, what string, err error) {
	switch {
	case isNoMatch(err):
		diags.AddError("NodeMaintenanceRollout CRD Not Installed", fmt.Sprintf(
			"%s failed: the cluster at %s does not serve %s: %v\n\nInstall or upgrade the node-maintenance operator to a version "+
				"with rollouts: it installs this CRD beside the NodeMaintenance one (see the provider documentation).", what, c.cluster, nmv1alpha1.RolloutCRDName, err))
	case apierrors.IsForbidden(err) && !isAdmissionDenial(err):
		diags.AddError("Not Allowed by Kubernetes RBAC", fmt.Sprintf(
			"%s failed: %v\n\nThe provider's identity needs get, list, watch, create, patch and delete on %s, and list on nodes "+
				"for the plan.", what, err, nmv1alpha1.RolloutCRDName))
	default:
		c.apiError(diags, summary, what, err)
	}
}
