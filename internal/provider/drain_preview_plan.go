package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain/live"
)

// planPreviewTimeout bounds the drain preview of a plan: a plan must stay
// quick, and a cluster that does not answer in time only costs the preview.
const planPreviewTimeout = 10 * time.Second

// maxPlanRiskWarnings bounds the risk warnings of one plan; the data source
// lists them all.
const maxPlanRiskWarnings = 10

// maxListedPods bounds the pods one line of a plan warning names.
const maxListedPods = 20

// previewWarnings adds the drain preview of a maintenance about to be
// created to a plan, as warnings only: a plan never fails on a preview.
// c is nil when the provider is not configured; nodeName is empty while
// unknown.
func previewWarnings(ctx context.Context, c *clients, nodeName string, block types.Object, diags *diag.Diagnostics) {
	unavailable := func(why string) {
		diags.AddWarning("Drain Preview Unavailable",
			fmt.Sprintf("The plan cannot show what the drain of node %q will do: %s. The plan goes on without it; the operator's "+
				"webhook shows the same preview as warnings when the NodeMaintenance is created, and the nodemaintenance_drain_preview "+
				"data source shows it on demand.", nodeName, why))
	}
	switch {
	case nodeName == "":
		diags.AddWarning("Drain Preview Unavailable", "The plan cannot show what the drain will do: node_name is not known until apply.")
		return
	case c == nil:
		unavailable("the provider's cluster settings are not known yet")
		return
	}
	policy, d := drainPolicy(ctx, block)
	if d.HasError() {
		return // the drain block's own diagnostics say what is wrong
	}
	ctx, cancel := context.WithTimeout(ctx, planPreviewTimeout)
	defer cancel()
	p, err := live.Preview(ctx, c.kube, nodeName, policy, time.Now())
	switch {
	case errors.Is(err, live.ErrNodeNotFound):
		unavailable(fmt.Sprintf("there is no node %q in the cluster at %s, so the apply will fail", nodeName, c.cluster))
		return
	case ctx.Err() != nil:
		unavailable(fmt.Sprintf("the cluster at %s did not answer within %s (%v)", c.cluster, planPreviewTimeout, err))
		return
	case err != nil:
		unavailable(fmt.Sprintf("reading the cluster at %s failed: %v", c.cluster, err))
		return
	}
	diags.AddWarning("Drain Preview: Node "+nodeName, previewDetail(p))
	for i, r := range p.Risks {
		if i == maxPlanRiskWarnings {
			diags.AddWarning("More Drain Risks", fmt.Sprintf("%d more risks of the drain of node %s are not shown here; the nodemaintenance_drain_preview data source lists them all.",
				len(p.Risks)-i, nodeName))
			break
		}
		diags.AddWarning(riskTitle(r), r.Message)
	}
}

// previewDetail lists the pods a drain moves, leaves and waits for.
func previewDetail(p drain.Preview) string {
	var b strings.Builder
	b.WriteString(p.Summary() + ".\n")
	fmt.Fprintf(&b, "\nEvicted (they move, or go if nothing recreates them): %s", listed(podNames(p.Evict)))
	fmt.Fprintf(&b, "\nStaying on the node: %s", listed(reasonLines(p.Skip)))
	fmt.Fprintf(&b, "\nWaited for: %s", listed(reasonLines(p.WaitFor)))
	return b.String()
}

func riskTitle(r drain.Risk) string {
	switch r.Kind {
	case drain.RiskGuard:
		return "The Maintenance Will Be Refused: " + r.Subject
	case drain.RiskBudgetAllowsNone, drain.RiskMultipleBudgets:
		return "The Drain Will Wait: " + r.Subject
	case drain.RiskOutage:
		return "Outage, Not a Move: " + r.Subject
	case drain.RiskNoController:
		return "Pod Deleted for Good: " + r.Subject
	case drain.RiskEmptyDir:
		return "emptyDir Data Lost: " + r.Subject
	case drain.RiskNoRoom:
		return "No Room for the Evicted Pods (First-Fit Estimate)"
	}
	return "Drain Risk: " + r.Subject
}

func listed(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	shown := items[:min(len(items), maxListedPods)]
	s := strings.Join(shown, ", ")
	if extra := len(items) - len(shown); extra > 0 {
		s += fmt.Sprintf(" and %d more", extra)
	}
	return s
}

func reasonLines(rs []drain.PodReason) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s (%s)", r.Pod, r.Reason))
	}
	return out
}

func podNames(pods []k8stypes.NamespacedName) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.String())
	}
	return out
}

func podReasons(rs []drain.PodReason) []podReasonModel {
	out := make([]podReasonModel, 0, len(rs))
	for _, r := range rs {
		out = append(out, podReasonModel{Pod: r.Pod.String(), Reason: r.Reason})
	}
	return out
}
