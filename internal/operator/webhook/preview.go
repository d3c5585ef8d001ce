package webhook

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain/live"
)

// The preview names the Deployment of a pod through its ReplicaSet; in a
// cluster beyond PreviewBounds it checks a workload's ready replicas
// elsewhere from its ReplicaSets' and StatefulSet's status.
// +kubebuilder:rbac:groups=apps,resources=replicasets,verbs=list
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get

// PreviewTimeout bounds the drain preview of an admitted create: the
// webhook's own timeout (15 s) also covers the admission decision.
const PreviewTimeout = 3 * time.Second

// PreviewBounds keep the preview of every create cheap: the room on the
// other nodes is estimated only in a cluster of at most this many nodes and
// pods (live.HotPath). Larger ones get the rest of the preview; the
// provider's data source and the plan of a nodemaintenance estimate the room
// in any cluster.
var PreviewBounds = live.HotPath

// The API server may cut a warning longer than this, and drops the warnings
// beyond maxWarningBytes in all.
const (
	maxWarningLength = 256
	maxWarningBytes  = 4000
)

// previewWarnings are the admission warnings of a create the webhook
// admitted: what a drain of the node would do now and its risks
// (drain.Preview), which kubectl prints. It never refuses: a preview that
// fails or runs out of time is a warning too.
func (v *Validator) previewWarnings(ctx context.Context, nm *nmv1beta1.NodeMaintenance, known live.Known) admission.Warnings {
	ctx, cancel := context.WithTimeout(ctx, PreviewTimeout)
	defer cancel()
	in, err := live.ReadFor(ctx, v.Reader, known, PreviewBounds)
	var p drain.Preview
	if err == nil {
		in.Policy, in.Now = nm.Spec.Drain, v.now()
		p, err = drain.NewPreview(in)
	}
	if err != nil {
		return admission.Warnings{bounded(fmt.Sprintf("could not preview the drain of node %s (%v); the NodeMaintenance is admitted all the same", nm.Spec.NodeName, err))}
	}
	out := admission.Warnings{bounded(p.Summary())}
	size := len(out[0])
	for _, r := range p.Risks {
		w := bounded(r.Message)
		if size += len(w); size > maxWarningBytes {
			break
		}
		out = append(out, w)
	}
	return out
}

// bounded cuts a warning to maxWarningLength characters.
func bounded(w string) string {
	if utf8.RuneCountInString(w) <= maxWarningLength {
		return w
	}
	return string([]rune(w)[:maxWarningLength-1]) + "…"
}
