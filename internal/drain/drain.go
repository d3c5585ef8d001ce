// Package drain decides which pods must leave a node under maintenance and
// evicts them through the Eviction API. It knows nothing about the reconciler:
// NewPlan classifies the pods it is given (from a cache) under the Rules of a
// maintenance, Evict makes one bounded round of eviction calls, and both
// return values the caller turns into status. The operator drains with it and
// the webhook and the provider preview with it (NewPreview, package live),
// calling the same NewPlan with the same Rules, so it belongs to none of them:
// it imports no controller-runtime and nothing of internal/operator or
// internal/provider.
//
// The files: rules.go (every rule, NewPlan), fields.go (the pod fields the
// rules read, which the operator's pod cache keeps), plan.go (the result),
// evict.go (one round of evictions), round.go (its summary), preview.go,
// risks.go and capacity.go (what a drain would do now, and what it risks).
//
// The rules follow `kubectl drain --ignore-daemonsets --delete-emptydir-data
// --force`, with kubectl's own PodFilter and PodDeleteStatus types:
//   - DaemonSet pods and mirror (static) pods stay: their controller would put
//     them right back, and the maintenance taints do not keep them off.
//   - Pods with emptyDir volumes are evicted (their scratch data is lost, as a
//     node in maintenance may be rebooted or replaced anyway).
//   - Pods without a controller are evicted: nothing recreates them elsewhere,
//     which is what the user asked for by putting the node into maintenance.
//   - Terminating pods are waited for, never evicted twice.
//   - Finished pods (Succeeded/Failed) are evicted: they hold nothing, and a
//     finished pod left on the node would keep the drain from ending.
//   - A pod created after the node was cordoned that tolerates the maintenance
//     taints chose to run on a node in maintenance (for example an operator
//     with `tolerations: [{operator: Exists}]`). Evicting it would only make its
//     controller put a replacement back, forever, so it is left alone like a
//     DaemonSet pod. Pods that were already there when the maintenance started
//     are evicted once whatever they tolerate.
//
// A NodeMaintenance's spec.drain narrows them: only the pods its podSelector
// matches leave; on a node that is not Ready, a pod deleted longer ago than
// skipWaitForDeleteTimeout counts as gone; and Cluster API's drain label is
// honoured (skip: the pod stays; wait-completed: the pod is not evicted, the
// drain waits until it completes).
package drain
