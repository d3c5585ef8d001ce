package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

const (
	// A rollout takes as long as its waves: the defaults leave room for a
	// node pool, and the timeouts block bounds them.
	defaultRolloutCreateTimeout = 2 * time.Hour
	defaultRolloutDeleteTimeout = 30 * time.Minute
)

// Schema of the nodemaintenance_rollout resource.
func (r *RolloutResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	attrs := rolloutSpecAttributes()
	attrs["wait_for_completion"] = schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
		MarkdownDescription: "Whether create and update wait until the rollout ends (`true`, the default), or return once the operator " +
			"accepted it and resolved its node set (`false`), so that a pipeline does not hold a runner for a window hours away; the " +
			"`nodemaintenance_rollout` data source gates on its end later. Not part of the rollout: changing it changes nothing in the cluster."}
	safetyAttributes(attrs)
	rolloutStatusAttributes.resourceAttributes(attrs)
	resp.Schema = schema.Schema{
		MarkdownDescription: "Maintains every node of a set in waves: creates a `NodeMaintenanceRollout` (`nodemaintenance.io/v1alpha1`), " +
			"through which the operator drains at most `max_unavailable` nodes at a time, runs the `step` Job on each drained node, " +
			"restores it, lets it soak and moves on. Apply waits until the rollout `Succeeded` and logs a line whenever a node changes " +
			"state (`TF_LOG_PROVIDER=INFO`); a `Halted` rollout is an error naming the failed nodes, and the resource is kept tainted so " +
			"that destroy restores them. The plan shows the node set, the waves and what would block each node's drain. Destroy " +
			"deletes the rollout and waits until every node it holds is restored. See the guide \"Patch a node pool\".",
		Attributes: attrs,
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Update: true, Delete: true,
				CreateDescription: "How long to wait for the rollout to succeed (default 2h).",
				UpdateDescription: "How long an update waits for the rollout to pause or to succeed (default 2h).",
				DeleteDescription: "How long to wait for every node to be restored (default 30m)."}),
		},
	}
}

// rolloutSpecAttributes are the attributes of the rollout's identity, its
// node set, its pace, its drain and its step.
func rolloutSpecAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"id": schema.StringAttribute{Computed: true, MarkdownDescription: "Name of the NodeMaintenanceRollout.",
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		"name": schema.StringAttribute{Required: true,
			MarkdownDescription: "Name of the `NodeMaintenanceRollout` object (a DNS-1123 subdomain); its NodeMaintenances and step Jobs are " +
				"labelled `" + nmv1alpha1.RolloutLabel + "=<name>`. Changing it replaces the resource.",
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			Validators:    []validator.String{kubernetesName{"NodeMaintenanceRollout"}}},
		"node_selector": schema.StringAttribute{Optional: true,
			MarkdownDescription: "The nodes to maintain, by label, as `kubectl get nodes -l` takes it (e.g. `pool=blue,zone!=a`). The set is " +
				"resolved once, when the rollout starts, in name order; nodes that join later are not added. An empty selector, which " +
				"the API takes for every node, is refused here: name the label. Exactly one of `node_selector` and `node_names`. " +
				"Changing it replaces the resource.",
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			Validators:    []validator.String{labelSelector{}, stringvalidator.ExactlyOneOf(path.MatchRoot("node_names"))}},
		"node_names": schema.ListAttribute{Optional: true, ElementType: types.StringType,
			MarkdownDescription: "The nodes to maintain, by name, in this order. Exactly one of `node_selector` and `node_names`. " +
				"Changing it replaces the resource.",
			PlanModifiers: []planmodifier.List{listplanmodifier.RequiresReplace()},
			Validators: []validator.List{listvalidator.SizeAtLeast(1), listvalidator.UniqueValues(),
				listvalidator.ValueStringsAre(nodeNameValidators...)}},
		"max_unavailable": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultRolloutMaxUnavailable),
			MarkdownDescription: "How many nodes of the set may be out of service at once: a count (`\"3\"`) or a percentage of the set " +
				"(`\"30%\"`, rounded down, at least 1). Nodes of the set that are cordoned or NotReady for another reason count too. " +
				"The operator's own `max_unavailable` and the control-plane guard still apply to each node. Updated in place, also while " +
				"the rollout runs.",
			Validators: []validator.String{rolloutMaxUnavailable{}}},
		"reason": schema.StringAttribute{Optional: true,
			MarkdownDescription: "Why the nodes are maintained, given to each node's NodeMaintenance (at most 1024 characters). Updated in place.",
			Validators:          reasonValidators},
		"drain": drainAttribute(),
		"step":  stepAttribute(),
		"hold_for": schema.StringAttribute{Optional: true,
			MarkdownDescription: "Without a `step`: how long each drained node stays in maintenance before it is restored, as a Go " +
				"duration (`10m`). Default 0. Updated in place.",
			Validators: []validator.String{positiveDuration{orZero: true}}},
		"soak_for": schema.StringAttribute{Optional: true,
			MarkdownDescription: "How long each node must be restored and Ready before its slot goes to the next node, as a Go duration " +
				"(`5m`). Default 0. Updated in place.",
			Validators: []validator.String{positiveDuration{orZero: true}}},
		"on_failure": schema.StringAttribute{Optional: true,
			MarkdownDescription: "What happens when a node fails (its drain failed, or its step failed or timed out): `Halt` (the " +
				"default: no further node starts, the failed node stays as its drain's `on_timeout` left it, and the apply fails naming it) " +
				"or `Continue` (the failed node is restored and the rollout goes on, until more than `max_failures` nodes failed). Updated in place.",
			Validators: []validator.String{stringvalidator.OneOf(string(nmv1alpha1.RolloutHalt), string(nmv1alpha1.RolloutContinue))}},
		"max_failures": schema.Int64Attribute{Optional: true,
			MarkdownDescription: "With `on_failure = \"Continue\"`: how many failed nodes are tolerated; one more halts the rollout. " +
				"Default 0. Updated in place.",
			Validators: []validator.Int64{int64validator.Between(0, 1<<31-1)}},
		"paused": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
			MarkdownDescription: "Starts no new node while true; the nodes in progress finish. Created paused, the apply waits only until " +
				"the node set is resolved (phase `Paused`). Updated in place: pausing waits for phase `Paused`, resuming waits for the " +
				"rollout to finish, as a create does.",
		},
	}
}

// stepAttribute is the step block. Every field is immutable: changing one
// replaces the rollout.
func stepAttribute() schema.Attribute {
	return schema.SingleNestedAttribute{Optional: true,
		MarkdownDescription: "A Job run on each node while it is drained; the node's step succeeds when the Job completes and fails " +
			"when it fails or exceeds `timeout`. The operator sets the Job pod's `nodeName` to the node and adds tolerations of the " +
			"maintenance taints. Without it each node is held for `hold_for` and restored. Changing it replaces the resource.",
		PlanModifiers: []planmodifier.Object{objectplanmodifier.RequiresReplace()},
		Attributes: map[string]schema.Attribute{
			"namespace": schema.StringAttribute{Required: true,
				MarkdownDescription: "Namespace of the step's Jobs. Whoever creates the rollout must be allowed to create Jobs there.",
				Validators:          namespaceValidators},
			"job_template": schema.StringAttribute{Required: true,
				MarkdownDescription: "The Job run on each node: a batch/v1 `JobTemplateSpec` (`metadata` and `spec`, as under a " +
					"CronJob's `jobTemplate`) in YAML or JSON, e.g. from `yamlencode()`. It must have at least one container; unknown " +
					"fields are refused at plan time.",
				Validators: []validator.String{jobTemplate{}}},
			"timeout": schema.StringAttribute{Optional: true,
				MarkdownDescription: "Bounds the step on one node, from its Job's creation, as a Go duration (`15m`); a step that takes " +
					"longer fails the node. Without it a step takes as long as it takes.",
				Validators: []validator.String{positiveDuration{}}},
		},
	}
}
