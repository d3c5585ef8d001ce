package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
)

// Schema of the nodemaintenance_operator resource.
func (r *OperatorResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	// The defaults are the default installation's, which deploy/ ships as a
	// manifest: an apply with every attribute unset installs exactly that.
	defaults := config.DefaultOperatorOptions()
	resp.Schema = schema.Schema{
		MarkdownDescription: "Installs the node-maintenance operator that does the cordon and drain: namespace, ServiceAccount, " +
			"RBAC generated from the operator's code, the `NodeMaintenance` CRD, the Deployment, Services and the validating " +
			"webhook (certificates issued in-cluster). Objects are server-side applied; create and update wait until the CRD is " +
			"established and the Deployment available. Destroy refuses while NodeMaintenances exist, then removes everything.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The namespace of the installation.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"namespace": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaults.Namespace),
				MarkdownDescription: "Namespace of the operator (a DNS-1123 label). Changing it replaces the installation.",
				PlanModifiers:       []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Validators:          namespaceValidators},
			"image": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaults.Image),
				MarkdownDescription: "Operator image (`make image` builds the default, `" + config.DefaultImage + "`)."},
			"replicas": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(int64(defaults.Replicas)),
				MarkdownDescription: "Replicas of the operator (0 or more); one leads, all serve the webhook.",
				Validators:          replicasValidators},
			"max_unavailable": schema.StringAttribute{Optional: true,
				MarkdownDescription: "Most nodes in maintenance at once, as a count (`2`) or a percentage of all nodes (`20%`), not negative. Unset: no limit.",
				Validators:          maxUnavailableValidators},
			"max_unavailable_policy": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaults.MaxUnavailablePolicy),
				MarkdownDescription: "What happens to a `nodemaintenance` created while `max_unavailable` nodes are in maintenance already " +
					"(`--max-unavailable-policy`). `Queue` (the default): it is admitted and waits, its node not cordoned, until a slot frees; " +
					"maintenances start first come first served, in the order they were created, and the apply waits meanwhile " +
					"(the `create` timeout counts the time in the queue). `Refuse`: the webhook refuses the create and the apply fails " +
					"at once, naming the nodes in maintenance. Without `max_unavailable` it changes nothing.",
				Validators: maxUnavailablePolicyValidators},
			"allow_force_drain": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(defaults.AllowForceDrain),
				MarkdownDescription: "Let a NodeMaintenance's `drain.on_timeout = \"Force\"` delete the pods left when its drain times out, " +
					"bypassing their PodDisruptionBudgets: grants the operator `delete` on pods and runs it with `--allow-force-drain`. " +
					"Off (the default), the operator cannot delete a pod and the webhook refuses `Force` with an error that says how to allow it."},
			"cpu_request": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaults.Resources.Requests.Cpu().String()),
				MarkdownDescription: "CPU request of the operator container, a Kubernetes quantity (`50m`).",
				Validators:          quantityValidators},
			"memory_request": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaults.Resources.Requests.Memory().String()),
				MarkdownDescription: "Memory request of the operator container, a Kubernetes quantity (`64Mi`).",
				Validators:          quantityValidators},
			"memory_limit": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaults.Resources.Limits.Memory().String()),
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
