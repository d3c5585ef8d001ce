// Package controller reconciles NodeMaintenance objects: it holds the node
// lease, cordons and taints the node, drains it through the Eviction API, keeps
// the status live, and restores the node exactly when the object is deleted.
//
// A pass is a list of phases run in order by one runner, which writes the
// status once, at the end of the pass; only the writes that crash safety
// orders before a step are made mid-pass (phases). The files follow the
// reconcile: controller (the types, Reconcile, which pass a state calls
// for), phases (the phase, its scope, the runner), setup (indexes and
// watches), queue (the --max-unavailable queue), maintain (the Running
// pass), lease (the lease, and the Succeeded pass that keeps it), timeout
// (spec.drain.timeout and onTimeout), policy (the drain's rules), finalize
// (the deletion pass), restore (the node given back: on deletion, on
// failure, and the pass that finishes a restore), conditions, lifecycle
// (the node's lifecycle conditions), status (what a pass writes, and how
// often) and progress (what passes remember between them).
//
// The maintained node reports the maintenance in the node lifecycle
// conditions of KEP-5683 (lifecycle; alpha in Kubernetes 1.37, feature gate
// NodeLifecycleConditions), which the KEP leaves to "an admin, or an
// admin-authorized maintenance controller": MaintenanceInProgress=True
// (reason AdminRequested) from the cordon on, with DrainInProgress=True
// (AdminRequested) and Drained=False (DrainNotCompleted) while the drain
// goes on; then DrainInProgress=False and Drained=True (both
// DrainCompleted); after a drain timeout that leaves the node in
// maintenance, DrainInProgress=False and Drained=False (DrainTimedOut).
// Messages begin with nodestate.ConditionMarker and name the
// NodeMaintenance. They are written with a strategic merge patch of the
// node's status that names only these types, so the kubelet's conditions are
// never rewritten. A foreign condition of these types (one without the
// marker) that was on the node when the maintenance began is recorded with
// the node's prior state; the maintenance writes over it, and the restore
// puts it back exactly. The restore removes the rest of the operator's, and
// leaves alone what someone else wrote during the maintenance.
//
// The controller-runtime cache holds NodeMaintenances, nodes, budgets and
// leases; the pods are read from NodePods, which holds only the pods of the
// nodes being drained (package nodepods), so that the operator's memory does
// not grow with the cluster's pods.
package controller

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/ledger"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/nodewrites"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/notify"
)

// Event reasons. Those the medik8s node-maintenance-operator also emits use
// its strings (BeginMaintenance, SucceedMaintenance, FailedMaintenance,
// UncordonNode, RemovedMaintenance), so tools that watch for them keep
// working. The others are this operator's own: medik8s records no event for
// the cordon, a refused eviction or a lease it cannot hold.
const (
	ReasonBeginMaintenance     = "BeginMaintenance"
	ReasonSucceededMaintenance = "SucceedMaintenance"
	ReasonFailedMaintenance    = "FailedMaintenance"
	ReasonRemovedMaintenance   = "RemovedMaintenance"
	ReasonUncordon             = "UncordonNode"
	ReasonCordon               = "Cordon"
	ReasonEvictionBlocked      = "EvictionBlocked"
	ReasonLeaseNotHeld         = "LeaseNotHeld"
	ReasonAdoptedMaintenance   = "AdoptedMaintenance"
)

// Defaults of Options, shared with the operator's flags.
//
// DefaultMaxConcurrentReconciles stays 10: in P7 (500 nodes, 50
// maintenances in flight) passes waited 4 s on average in the queue with
// 10 workers, yet 50 workers made the rollout no faster on a machine whose
// cores the cluster already kept busy (bench/README.md, "P7 at scale").
const (
	DefaultMaxConcurrentReconciles = 10
	DefaultEvictionParallelism     = 32
	DefaultLeaseRetryInterval      = 5 * time.Second
	DefaultBlockedBackoffInitial   = 100 * time.Millisecond
	DefaultBlockedBackoffMax       = 5 * time.Second
)

// conflictRetry is the retry after a write lost a race with another writer.
const conflictRetry = 100 * time.Millisecond

// Options tune the reconciler.
type Options struct {
	// MaxConcurrentReconciles is how many NodeMaintenances are worked on at once.
	MaxConcurrentReconciles int
	// EvictionParallelism bounds the eviction calls in flight for one node.
	EvictionParallelism int
	// LeaseRetryInterval is how long to wait before retrying a lease that could
	// not be obtained; each failure after the drain started counts once.
	LeaseRetryInterval time.Duration
	// BlockedBackoffInitial and BlockedBackoffMax bound the retry of evictions a
	// PodDisruptionBudget refused. PDB and pod events retry sooner.
	BlockedBackoffInitial, BlockedBackoffMax time.Duration
	// SkipNameValidation allows several managers in one process (tests that
	// restart the operator in-process).
	SkipNameValidation bool
	// OperatorDeployment, when set, is the operator's own Deployment: its
	// pods on a node under maintenance are evicted last, once every other
	// pod has left, so the drain of the node the operator runs on is not cut
	// short by the operator moving (another replica, or the replacement,
	// finishes it).
	OperatorDeployment types.NamespacedName
	// AllowForceDrain lets a drain whose timeout expired with
	// spec.drain.onTimeout Force delete the pods left, bypassing their
	// PodDisruptionBudgets. The installation grants the deletion of pods
	// only with it (nodemaintenance_operator's allow_force_drain).
	AllowForceDrain bool
	// MaxUnavailable, when set, queues the NodeMaintenances beyond this many
	// nodes in maintenance at once (a count, or a percentage of all nodes):
	// they wait, their nodes untouched, until a slot frees, first come first
	// served (nodemaintenance_queue.go). The operator sets it with
	// --max-unavailable-policy=Queue; with Refuse the webhook refuses
	// those creates instead.
	MaxUnavailable *intstr.IntOrString
}

func (o *Options) defaults() {
	if o.MaxConcurrentReconciles <= 0 {
		o.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	if o.EvictionParallelism <= 0 {
		o.EvictionParallelism = DefaultEvictionParallelism
	}
	if o.LeaseRetryInterval <= 0 {
		o.LeaseRetryInterval = DefaultLeaseRetryInterval
	}
	if o.BlockedBackoffInitial <= 0 {
		o.BlockedBackoffInitial = DefaultBlockedBackoffInitial
	}
	if o.BlockedBackoffMax <= 0 {
		o.BlockedBackoffMax = DefaultBlockedBackoffMax
	}
}

// NodeMaintenanceReconciler reconciles NodeMaintenance objects.
type NodeMaintenanceReconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server, for retries after a conflict.
	APIReader client.Reader
	// Recent is this process's recent writes of nodes, which the reads of
	// nodes from the cache see (nodewrites); shared with the rollout
	// controller. Nil reads the cache as it is.
	Recent   *nodewrites.Recent
	Recorder events.EventRecorder
	Leases   *lease.Manager
	// Admissions, when set, is the webhook's admission ledger: a finalized
	// NodeMaintenance leaves it, so its node is free for the next create at
	// once.
	Admissions *ledger.Ledger
	Evictor    drain.Evictor
	// Pods holds the pods of the nodes being drained (nodepods.Cache).
	Pods    NodePods
	Options Options
	// Now is the clock, for tests.
	Now func() time.Time
	// Notify sends the maintenance events to NotifyTo (--notify-url); nil
	// sends none.
	Notify   *notify.Sender
	NotifyTo []notify.Destination

	mu    sync.Mutex
	state map[types.UID]*progress

	// queueMu serialises the --max-unavailable decisions; granted are the
	// slots this process granted (nodemaintenance_queue.go says why).
	queueMu sync.Mutex
	granted map[types.UID]bool
}

// The RBAC below is what the operator's API calls need and no more; the
// provider's TestAccOperatorRunsAsItsServiceAccount checks in the API server's
// audit log that each verb is used. Reads of NodeMaintenances, PDBs and
// leases go through the informer cache, and those of pods through the
// informers of the nodes being drained (NodePods); an informer watches (and
// lists, on API servers that do not stream a watch's initial list) but never
// gets. The few pods read live are listed by field (spec.nodeName,
// metadata.name). Nodes are also read directly, after a conflict and by the
// webhook.
// Finalizers are set with a plain update of our own object.
//
// +kubebuilder:rbac:groups=nodemaintenance.medik8s.io,resources=nodemaintenances,verbs=list;watch;update
// +kubebuilder:rbac:groups=nodemaintenance.medik8s.io,resources=nodemaintenances/status,verbs=update
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile moves one NodeMaintenance one bounded step forward: one pass,
// the list of phases its state calls for (pass).
func (r *NodeMaintenanceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	nm := &nmv1beta1.NodeMaintenance{}
	if err := r.Client.Get(ctx, req.NamespacedName, nm); err != nil {
		if apierrors.IsNotFound(err) {
			r.Pods.Release(req.Name)
			if !r.releasedHere(req.Name) {
				// One deleted before it had a finalizer is never finalized.
				r.releaseAdmission(ctx, "", req.Name)
			}
			r.forgetName(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.forgetEarlier(nm)
	if r.wasFinalizedHere(nm) {
		return ctrl.Result{}, nil // the cache is behind the finalizer's removal
	}
	nm = r.newest(nm)
	if !drains(nm) {
		r.Pods.Release(nm.Name)
	}
	return r.run(ctx, r.newScope(nm), r.pass(nm))
}

// pass is the list of phases of a pass over nm.
func (r *NodeMaintenanceReconciler) pass(nm *nmv1beta1.NodeMaintenance) []phase {
	if !nm.DeletionTimestamp.IsZero() {
		return r.finalize()
	}
	phases := []phase{r.addFinalizer}
	switch {
	case restorePending(nm):
		// A restore that a pass began and could not finish.
		return append(phases, r.finishRestore()...)
	case nm.Status.Phase == nmv1beta1.MaintenanceFailed:
		// Terminal: the node was never touched, has been restored, or is
		// left in maintenance until the object is deleted (spec.drain
		// onTimeout Fail, or its recorded state unreadable). Nothing to retry.
		return phases
	case nm.Status.Phase == nmv1beta1.MaintenanceSucceeded:
		return append(phases, r.keepMaintenance()...)
	}
	return append(phases, r.maintain()...)
}

// addFinalizer keeps the finalizer on a maintenance whose node carries (or
// carried) its changes: the prior-state record exists. The finalizer is
// first written together with that record (writeRecord), in the one write
// that must come before the cordon, not in a write of its own: until then
// the maintenance has nothing to restore, and the lease it may already
// hold names it as owner, so a deletion that does not wait (no finalizer
// yet) leaves no lease behind either (the garbage collector deletes it).
// This pass writes it only when someone removed it from a maintenance that
// has a record; nothing of the maintenance is touched before it is back.
func (r *NodeMaintenanceReconciler) addFinalizer(ctx context.Context, s *scope) (ctrl.Result, error) {
	if _, recorded := s.nm.Annotations[nodestate.PriorStateAnnotation]; !recorded ||
		controllerutil.ContainsFinalizer(s.nm, nmv1beta1.NodeMaintenanceFinalizer) {
		return ctrl.Result{}, nil
	}
	controllerutil.AddFinalizer(s.nm, nmv1beta1.NodeMaintenanceFinalizer)
	replaced := s.nm.ResourceVersion
	if err := r.Client.Update(ctx, s.nm); err != nil {
		return s.writeFailed(err)
	}
	r.wrote(replaced, s.nm)
	return ctrl.Result{}, nil
}

// writeRecord writes the prior-state record prior, and the finalizer with
// it, in one update of the NodeMaintenance: the write that must land before
// the pass touches the node. After a crash before it the node is untouched
// and a deletion has nothing to restore; after it, every deletion waits for
// the restore the record makes exact. When the object is gone by then (it
// was deleted before it had a finalizer), the lease this pass took for it is
// released at once instead of waiting for the garbage collector.
func (r *NodeMaintenanceReconciler) writeRecord(ctx context.Context, s *scope, prior nodestate.Prior) (ctrl.Result, error) {
	if s.nm.Annotations == nil {
		s.nm.Annotations = map[string]string{}
	}
	s.nm.Annotations[nodestate.PriorStateAnnotation] = prior.Encode()
	controllerutil.AddFinalizer(s.nm, nmv1beta1.NodeMaintenanceFinalizer)
	replaced := s.nm.ResourceVersion
	if err := r.Client.Update(ctx, s.nm); err != nil {
		if apierrors.IsNotFound(err) {
			if err := r.Leases.Release(ctx, s.nm.Spec.NodeName); err != nil {
				log.FromContext(ctx).Info("the lease of a maintenance deleted before it began is left to the garbage collector",
					"node", s.nm.Spec.NodeName, "error", err.Error())
			}
		}
		return s.writeFailed(err)
	}
	r.wrote(replaced, s.nm)
	return ctrl.Result{}, nil
}

// owner is the reference by which nm owns its node's lease (ObtainFor).
func owner(nm *nmv1beta1.NodeMaintenance) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: nmv1beta1.GroupVersion.String(), Kind: "NodeMaintenance", Name: nm.Name, UID: nm.UID}
}

// drains reports whether a pass over nm may still drain its node (maintain),
// the only step that reads the node's pods. A maintenance that is deleted,
// being restored, Failed or Succeeded never reads them again: keepMaintenance
// only holds the lease of the drained node, and a restore or a finalize
// touches the node and the lease, not its pods.
func drains(nm *nmv1beta1.NodeMaintenance) bool {
	switch {
	case !nm.DeletionTimestamp.IsZero(), restorePending(nm):
		return false
	case nm.Status.Phase == nmv1beta1.MaintenanceFailed, nm.Status.Phase == nmv1beta1.MaintenanceSucceeded:
		return false
	}
	return true
}

func (r *NodeMaintenanceReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
