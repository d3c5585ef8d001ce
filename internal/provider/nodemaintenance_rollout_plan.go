package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	rolloutvalidation "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1/validation"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain/live"
)

// maxPreviewedNodes bounds the nodes whose drain a plan previews: a plan
// must stay quick, and a node pool may be large.
const maxPreviewedNodes = 20

// rolloutPlanPreview adds what a rollout about to be created will do to the
// plan: an error when its node set is empty or names a node that does not
// exist; its waves, and the blockers of each node's drain, as warnings. A
// cluster it cannot read only costs the preview (a warning), as for
// nodemaintenance.
func rolloutPlanPreview(ctx context.Context, c *clients, m rolloutSpecModel, diags *diag.Diagnostics) {
	unavailable := func(why string) {
		diags.AddWarning("Rollout Preview Unavailable", fmt.Sprintf("The plan cannot show which nodes the rollout maintains, in which waves: %s. "+
			"The plan goes on without it; the apply's log (TF_LOG_PROVIDER=INFO) shows each wave as it starts.", why))
	}
	switch {
	case m.NodeSelector.IsUnknown() || m.NodeNames.IsUnknown() || m.MaxUnavailable.IsUnknown():
		unavailable("node_selector, node_names or max_unavailable is not known until apply")
		return
	case c == nil:
		unavailable("the provider's cluster settings are not known yet")
		return
	}
	spec, d := m.spec(ctx)
	if d.HasError() {
		return // the attributes' own diagnostics say what is wrong
	}
	ctx, cancel := context.WithTimeout(ctx, planPreviewTimeout)
	defer cancel()
	nodes, err := resolveNodes(ctx, c.kube, spec, diags)
	switch {
	case err != nil && ctx.Err() != nil:
		unavailable(fmt.Sprintf("the cluster at %s did not answer within %s (%v)", c.cluster, planPreviewTimeout, err))
		return
	case err != nil:
		unavailable(fmt.Sprintf("reading the nodes of the cluster at %s failed: %v", c.cluster, err))
		return
	case nodes == nil:
		return // resolveNodes said why (an error)
	}
	per, err := rolloutvalidation.MaxUnavailableNodes(spec.MaxUnavailable, len(nodes))
	if err != nil {
		return // the max_unavailable validator says why
	}
	diags.AddWarning("Rollout Waves", wavesDetail(nodes, per, m.MaxUnavailable.ValueString()))
	drainBlockers(ctx, c, nodes, spec.Drain, diags)
}

// resolveNodes is the node set as the operator resolves it: the nodes the
// selector matches, in name order, or the named nodes, in their order. An
// empty set or a missing node is an error in diags (and a nil set).
func resolveNodes(ctx context.Context, r client.Reader, spec nmv1alpha1.NodeMaintenanceRolloutSpec, diags *diag.Diagnostics) ([]string, error) {
	if spec.NodeSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(spec.NodeSelector)
		if err != nil {
			return nil, nil // the selector's validator says why
		}
		names, err := nodeNames(ctx, r, client.MatchingLabelsSelector{Selector: sel})
		if err != nil {
			return nil, err
		}
		if len(names) == 0 {
			diags.AddAttributeError(path.Root("node_selector"), "No Node Matches the Selector", fmt.Sprintf(
				"node_selector %q selects no node of the cluster, so the rollout would maintain nothing. Check the label with "+
					"`kubectl get nodes -l '%s'`.", metav1.FormatLabelSelector(spec.NodeSelector), metav1.FormatLabelSelector(spec.NodeSelector)))
			return nil, nil
		}
		slices.Sort(names)
		if problem := rolloutvalidation.SetSizeProblem(fmt.Sprintf("node_selector %q", sel.String()), names); problem != "" {
			diags.AddAttributeError(path.Root("node_selector"), "Node Set Too Large for One Rollout", problem+".")
			return nil, nil
		}
		return names, nil
	}
	missing, err := missingNodes(ctx, r, spec.NodeNames)
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		diags.AddAttributeError(path.Root("node_names"), "Node Not Found", fmt.Sprintf(
			"node_names names nodes the cluster does not have: %s. Fix or remove them (`kubectl get nodes` lists the nodes).",
			strings.Join(missing, ", ")))
		return nil, nil
	}
	return spec.NodeNames, nil
}

// getEachUpTo is how many named nodes missingNodes reads one by one; more
// are checked against a list of the cluster's nodes, a page at a time, so
// that the plan of a rollout of hundreds of listed nodes costs a few round
// trips, not one per node (which, to a remote API server, would run past
// planPreviewTimeout).
const getEachUpTo = 20

// missingNodes are those of names the cluster does not have, in their order.
func missingNodes(ctx context.Context, r client.Reader, names []string) ([]string, error) {
	var missing []string
	if len(names) <= getEachUpTo {
		for _, name := range names {
			err := r.Get(ctx, client.ObjectKey{Name: name}, &metav1.PartialObjectMetadata{TypeMeta: nodeMetadata})
			switch {
			case apierrors.IsNotFound(err):
				missing = append(missing, name)
			case err != nil:
				return nil, err
			}
		}
		return missing, nil
	}
	all, err := nodeNames(ctx, r)
	if err != nil {
		return nil, err
	}
	exists := make(map[string]bool, len(all))
	for _, name := range all {
		exists[name] = true
	}
	for _, name := range names {
		if !exists[name] {
			missing = append(missing, name)
		}
	}
	return missing, nil
}

// nodeNames are the names of the nodes opts select, from their metadata
// listed a page of 500 at a time.
func nodeNames(ctx context.Context, r client.Reader, opts ...client.ListOption) ([]string, error) {
	var names []string
	list := &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NodeList"}}
	for {
		if err := r.List(ctx, list, append(opts, client.Limit(500), client.Continue(list.Continue))...); err != nil {
			return nil, err
		}
		for i := range list.Items {
			names = append(names, list.Items[i].Name)
		}
		if list.Continue == "" {
			return names, nil
		}
	}
}

// nodeMetadata is the type of a Node read as metadata only.
var nodeMetadata = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}

// rolloutWaves splits the set in order into waves of per nodes.
func rolloutWaves(nodes []string, per int) [][]string {
	return slices.Collect(slices.Chunk(nodes, max(per, 1)))
}

func wavesDetail(nodes []string, per int, maxUnavailable string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The rollout maintains %d nodes, at most %d at a time (max_unavailable %q):\n", len(nodes), per, maxUnavailable)
	for i, wave := range rolloutWaves(nodes, per) {
		fmt.Fprintf(&b, "wave %d: %s\n", i+1, strings.Join(wave, ", "))
	}
	b.WriteString("\nThe set is resolved now, as the operator will resolve it when the rollout starts. A node of the set that is " +
		"already cordoned or NotReady takes a slot too, so a wave may start fewer nodes.")
	return b.String()
}

// drainBlockers adds, for each node (up to maxPreviewedNodes), the blockers
// of the drain preview the nodemaintenance resource shows: what the drain
// will wait on. A node that cannot be previewed is skipped. The previews are
// bounded (live.HotPath): a blocker needs no estimate of the room on other
// nodes, and an unbounded preview lists every node and pod of the cluster,
// 20 times over in a plan of a large pool. Beyond the bounds, whether a node
// is the last schedulable one is not checked here; the webhook still refuses
// its maintenance when the rollout creates it.
func drainBlockers(ctx context.Context, c *clients, nodes []string, policy *nmv1beta1.DrainPolicy, diags *diag.Diagnostics) {
	shown := 0
	for i, node := range nodes {
		if i == maxPreviewedNodes || ctx.Err() != nil {
			diags.AddWarning("Drain Preview Cut Short", fmt.Sprintf("The plan previewed the drains of %d of the rollout's %d nodes; "+
				"the nodemaintenance_drain_preview data source previews any node.", i, len(nodes)))
			return
		}
		p, err := live.PreviewWithin(ctx, c.kube, node, policy, time.Now(), live.HotPath)
		if err != nil {
			continue
		}
		for _, r := range p.Blockers() {
			if shown == maxPlanRiskWarnings {
				diags.AddWarning("More Drain Blockers", "More of the rollout's drains would wait than the plan shows; the "+
					"nodemaintenance_drain_preview data source lists them per node.")
				return
			}
			shown++
			diags.AddWarning(riskTitle(r)+" (node "+node+")", r.Message)
		}
	}
}
