package webhook

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain/live"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/ledger"
)

// What a decision reads: the NodeMaintenances and nodes, from the cache or
// live, and the ledger's recent admissions.

// source is where decide reads.
type source int

const (
	// fromCache reads the informer cache (Cache), or the API server's
	// watch cache without one or when the informer cache fails.
	fromCache source = iota
	// consistent reads live, as of now.
	consistent
)

// list lists for decide, from src. The items are only read: from the
// informer cache, they are not copied.
func (v *Validator) list(ctx context.Context, list client.ObjectList, src source) error {
	if src == consistent {
		return v.Reader.List(ctx, list)
	}
	if v.Cache != nil {
		err := v.Cache.List(ctx, list, client.UnsafeDisableDeepCopy)
		if err == nil {
			return nil
		}
		logf.FromContext(ctx).Info("cannot list from the cache; reading the API server's watch cache", "error", err.Error())
	}
	return v.Reader.List(ctx, list, live.AnyVersion)
}

// nodesInMaintenance maps node name to the NodeMaintenance holding it, from
// the list and from the ledger's creates admitted moments ago. It drops the
// entries older than ledger.TTL from entries; the others stay even when the
// list shows their NodeMaintenance, because a list from the watch cache of
// another API server may not show it yet.
func (v *Validator) nodesInMaintenance(items []nmv1beta1.NodeMaintenance, entries map[string]ledger.Entry) map[string]string {
	out := map[string]string{}
	for i := range items {
		out[items[i].Spec.NodeName] = items[i].Name
	}
	now := v.now()
	for node, e := range entries {
		switch {
		case now.Sub(e.At) > ledger.TTL:
			// Stored long ago, finalized, or never landed: done.
			delete(entries, node)
		default:
			if _, ok := out[node]; !ok {
				out[node] = e.Name
			}
		}
	}
	return out
}
