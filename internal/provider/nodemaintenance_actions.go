package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/action"
	actschema "github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// The nodemaintenance_drain and nodemaintenance_restore actions (Terraform
// 1.14 and later): another resource's lifecycle drains a node before its
// change and restores it after, through the same NodeMaintenance the
// resource creates. Unlike the resource, nothing is kept in the state: the
// node is held only between the two actions.

var (
	_ action.ActionWithConfigure      = &drainAction{}
	_ action.ActionWithModifyPlan     = &drainAction{}
	_ action.ActionWithValidateConfig = &drainAction{}
	_ action.ActionWithConfigure      = &restoreAction{}
)

// NewDrainAction is the constructor of the nodemaintenance_drain action.
func NewDrainAction() action.Action { return &drainAction{} }

// NewRestoreAction is the constructor of the nodemaintenance_restore action.
func NewRestoreAction() action.Action { return &restoreAction{} }

type drainAction struct{ clients *clients }

type restoreAction struct{ clients *clients }

type drainActionModel struct {
	NodeName types.String `tfsdk:"node_name"`
	Name     types.String `tfsdk:"name"`
	Reason   types.String `tfsdk:"reason"`
	Drain    types.Object `tfsdk:"drain"`
	Timeout  types.String `tfsdk:"timeout"`
}

type restoreActionModel struct {
	NodeName types.String `tfsdk:"node_name"`
	Name     types.String `tfsdk:"name"`
	Timeout  types.String `tfsdk:"timeout"`
}

// maintenanceName is the NodeMaintenance an action works on: name, or the
// resource's default for the node.
func maintenanceName(name, node types.String) string {
	if n := name.ValueString(); n != "" {
		return n
	}
	return namePrefix + node.ValueString()
}

// actionTimeout is the timeout attribute, or def when it is not set.
func actionTimeout(v types.String, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(v.ValueString()); err == nil && d > 0 {
		return d
	}
	return def
}

// actionTarget is the schema both actions share: which maintenance, and how
// long to wait for it.
func actionTarget(verb string, def time.Duration) map[string]actschema.Attribute {
	return map[string]actschema.Attribute{
		"node_name": actschema.StringAttribute{Required: true, Validators: nodeNameValidators,
			MarkdownDescription: fmt.Sprintf("Node to %s.", verb)},
		"name": actschema.StringAttribute{Optional: true, Validators: maintenanceNameValidators,
			MarkdownDescription: "Name of the NodeMaintenance. Defaults to `maintain-<node_name>`, as the `nodemaintenance` resource; " +
				"give the drain and the restore action of one node the same name."},
		"timeout": actschema.StringAttribute{Optional: true, Validators: []validator.String{positiveDuration{}},
			MarkdownDescription: fmt.Sprintf("How long the action waits, as a Go duration (default `%dm`).", int(def.Minutes()))},
	}
}

func (a *drainAction) Metadata(_ context.Context, req action.MetadataRequest, resp *action.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_drain"
}

func (a *drainAction) Schema(_ context.Context, _ action.SchemaRequest, resp *action.SchemaResponse) {
	attrs := actionTarget("drain", defaultCreateTimeout)
	attrs["reason"] = actschema.StringAttribute{Optional: true, Validators: reasonValidators,
		MarkdownDescription: "Why the node is in maintenance (`spec.reason`)."}
	attrs["drain"] = drainActionAttribute(drainBlockDescription)
	resp.Schema = actschema.Schema{
		MarkdownDescription: "Puts a node into maintenance and waits until it is drained (phase `Succeeded`), streaming the drain's " +
			"progress: the `nodemaintenance` resource's create, as an action. Trigger it `before_update` of the resource whose " +
			"change needs the node empty, and `nodemaintenance_restore` `after_update`. A `Failed` drain fails the action, so " +
			"the change does not run; the node stays cordoned until `nodemaintenance_restore` runs (or `kubectl delete nm`). " +
			"A maintenance of that name that exists for the node already is waited for, not created again. Terraform 1.14 and later.",
		Attributes: attrs,
	}
}

func (a *drainAction) Configure(_ context.Context, req action.ConfigureRequest, resp *action.ConfigureResponse) {
	a.clients = configuredClients(req.ProviderData, &resp.Diagnostics)
}

// ValidateConfig runs the webhook's drain rules on the drain block.
func (a *drainAction) ValidateConfig(ctx context.Context, req action.ValidateConfigRequest, resp *action.ValidateConfigResponse) {
	var m drainActionModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if !resp.Diagnostics.HasError() {
		checkDrainBlock(ctx, m.Drain, &resp.Diagnostics)
	}
}

// ModifyPlan shows the drain preview in the plan, as the resource does.
func (a *drainAction) ModifyPlan(ctx context.Context, req action.ModifyPlanRequest, resp *action.ModifyPlanResponse) {
	var m drainActionModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	node := ""
	if !m.NodeName.IsUnknown() {
		node = m.NodeName.ValueString()
	}
	previewWarnings(ctx, a.clients, node, m.Drain, &resp.Diagnostics)
}

// Invoke creates the NodeMaintenance (or finds it) and waits for the drain.
func (a *drainAction) Invoke(ctx context.Context, req action.InvokeRequest, resp *action.InvokeResponse) {
	var m drainActionModel
	if _, ok := begin(ctx, a.clients, &resp.Diagnostics, nil, read(req.Config, &m)); !ok {
		return
	}
	name, node := maintenanceName(m.Name, m.NodeName), m.NodeName.ValueString()
	timeout := actionTimeout(m.Timeout, defaultCreateTimeout)
	waitCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !a.start(waitCtx, name, node, m, resp) {
		return
	}
	got, err := waitFor(waitCtx, a.clients.kube, name, finished, func(nm *nmv1beta1.NodeMaintenance) {
		line := progressLine(name, nm)
		tflog.Info(ctx, line)
		resp.SendProgress(action.InvokeProgressEvent{Message: line})
	})
	switch {
	case err != nil:
		why := fmt.Sprintf("did not finish within %s (%v)", timeout, err)
		if ctx.Err() != nil {
			why = "was interrupted before the drain finished"
		}
		last := "The operator has not reported progress yet."
		if got != nil {
			last = progressLine(name, got) + "."
		}
		resp.Diagnostics.AddError("Node Not Drained", fmt.Sprintf("The wait for NodeMaintenance %q %s. %s\n\n"+
			"The maintenance goes on in the cluster and node %q stays cordoned: run the nodemaintenance_restore action, or "+
			"`kubectl delete nm %s`, to restore the node. Raise `timeout` to wait longer.", name, why, last, node, name))
	case got == nil:
		resp.Diagnostics.AddError("NodeMaintenance Deleted While Waiting",
			fmt.Sprintf("NodeMaintenance %q was deleted by someone else before the drain of node %q finished; the operator restored the node.", name, node))
	case got.Status.Phase == nmv1beta1.MaintenanceFailed:
		resp.Diagnostics.AddError("Node Maintenance Failed", fmt.Sprintf("The operator could not drain node %q: NodeMaintenance %q is Failed (%s). "+
			"The node stays as the operator left it: run the nodemaintenance_restore action, or `kubectl delete nm %s`, to restore it.",
			node, name, got.Status.LastError, name))
	default:
		resp.SendProgress(action.InvokeProgressEvent{Message: fmt.Sprintf("node %s is drained (NodeMaintenance %s Succeeded)", node, name)})
	}
}

// start creates the NodeMaintenance, or finds the one of that name for the
// node (an earlier drain that was interrupted, or the resource's). One of
// that name for another node is an error.
func (a *drainAction) start(ctx context.Context, name, node string, m drainActionModel, resp *action.InvokeResponse) bool {
	policy, diags := drainPolicy(ctx, m.Drain)
	if resp.Diagnostics.Append(diags...); diags.HasError() {
		return false
	}
	nm := &nmv1beta1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       nmv1beta1.NodeMaintenanceSpec{NodeName: node, Reason: m.Reason.ValueString(), Drain: policy},
	}
	err := a.clients.kube.Create(ctx, nm)
	if err == nil {
		resp.SendProgress(action.InvokeProgressEvent{Message: fmt.Sprintf("NodeMaintenance %s created for node %s", name, node)})
		return true
	}
	if !apierrors.IsAlreadyExists(err) {
		a.clients.apiError(&resp.Diagnostics, "Cannot Create NodeMaintenance", fmt.Sprintf("Creating NodeMaintenance %q for node %q", name, node), err)
		return false
	}
	existing := &nmv1beta1.NodeMaintenance{}
	if err := a.clients.kube.Get(ctx, client.ObjectKey{Name: name}, existing); err != nil {
		a.clients.apiError(&resp.Diagnostics, "Cannot Read NodeMaintenance", fmt.Sprintf("Reading NodeMaintenance %q", name), err)
		return false
	}
	switch {
	case existing.Spec.NodeName != node:
		resp.Diagnostics.AddAttributeError(pathName, "NodeMaintenance Name Taken", fmt.Sprintf(
			"NodeMaintenance %q exists already for node %q, not %q. Give this action another `name`.", name, existing.Spec.NodeName, node))
		return false
	case existing.DeletionTimestamp != nil:
		resp.Diagnostics.AddError("NodeMaintenance Being Deleted", fmt.Sprintf(
			"NodeMaintenance %q of node %q is being deleted (its node is being restored). Run the action again once it is gone.", name, node))
		return false
	}
	resp.SendProgress(action.InvokeProgressEvent{Message: fmt.Sprintf("NodeMaintenance %s exists for node %s already; waiting for it", name, node)})
	return true
}

func (a *restoreAction) Metadata(_ context.Context, req action.MetadataRequest, resp *action.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_restore"
}

func (a *restoreAction) Schema(_ context.Context, _ action.SchemaRequest, resp *action.SchemaResponse) {
	resp.Schema = actschema.Schema{
		MarkdownDescription: "Ends a node's maintenance: deletes its `NodeMaintenance` and waits until the operator has restored the " +
			"node exactly as it was, streaming progress (the `nodemaintenance` resource's destroy, as an action). A node without " +
			"a maintenance of that name is left alone and the action succeeds. Terraform 1.14 and later.",
		Attributes: actionTarget("restore", defaultDeleteTimeout),
	}
}

func (a *restoreAction) Configure(_ context.Context, req action.ConfigureRequest, resp *action.ConfigureResponse) {
	a.clients = configuredClients(req.ProviderData, &resp.Diagnostics)
}

// Invoke deletes the NodeMaintenance and waits until it is gone.
func (a *restoreAction) Invoke(ctx context.Context, req action.InvokeRequest, resp *action.InvokeResponse) {
	var m restoreActionModel
	if _, ok := begin(ctx, a.clients, &resp.Diagnostics, nil, read(req.Config, &m)); !ok {
		return
	}
	name, node := maintenanceName(m.Name, m.NodeName), m.NodeName.ValueString()
	timeout := actionTimeout(m.Timeout, defaultDeleteTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nm := &nmv1beta1.NodeMaintenance{}
	err := a.clients.kube.Get(ctx, client.ObjectKey{Name: name}, nm)
	switch {
	case apierrors.IsNotFound(err):
		resp.SendProgress(action.InvokeProgressEvent{Message: fmt.Sprintf("no NodeMaintenance %s: node %s is not in maintenance", name, node)})
		return
	case err != nil:
		a.clients.apiError(&resp.Diagnostics, "Cannot Read NodeMaintenance", fmt.Sprintf("Reading NodeMaintenance %q", name), err)
		return
	case nm.Spec.NodeName != node:
		resp.Diagnostics.AddAttributeError(pathName, "NodeMaintenance of Another Node", fmt.Sprintf(
			"NodeMaintenance %q is the maintenance of node %q, not %q; nothing was deleted. Check the action's `name`.", name, nm.Spec.NodeName, node))
		return
	}
	if err := a.clients.kube.Delete(ctx, nm); err != nil && !apierrors.IsNotFound(err) {
		a.clients.apiError(&resp.Diagnostics, "Cannot Delete NodeMaintenance", fmt.Sprintf("Deleting NodeMaintenance %q", name), err)
		return
	}
	resp.SendProgress(action.InvokeProgressEvent{Message: fmt.Sprintf("NodeMaintenance %s deleted; waiting for node %s to be restored", name, node)})
	if _, err := waitFor(ctx, a.clients.kube, name, gone, nil); err != nil {
		resp.Diagnostics.AddError("Node Not Restored Yet", fmt.Sprintf(
			"NodeMaintenance %q still exists after %s (%v): the operator has not removed its finalizer %q, so node %q may not be restored yet. "+
				"Check that the node-maintenance operator runs and look at `kubectl describe nm %s`; the deletion goes on, and the action can run again.",
			name, timeout, err, nmv1beta1.NodeMaintenanceFinalizer, node, name))
		return
	}
	resp.SendProgress(action.InvokeProgressEvent{Message: fmt.Sprintf("node %s is restored (NodeMaintenance %s is gone)", node, name)})
}
