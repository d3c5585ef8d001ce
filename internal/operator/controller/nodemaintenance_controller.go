// Package controller reconciles NodeMaintenance objects: it holds the node
// lease, cordons and taints the node, drains it through the Eviction API, keeps
// the status live, and restores the node exactly when the object is deleted.
//
// The files follow the reconcile: setup (indexes and watches), lease,
// maintain (the Running phase), finalize (restore on deletion), status
// (what a pass writes) and progress (what passes remember between them).
//
// The controller-runtime cache holds NodeMaintenances, nodes, budgets and
// leases; the pods are read from NodePods, which holds only the pods of the
// nodes being drained (package nodepods), so that the operator's memory does
// not grow with the cluster's pods.
package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/ledger"
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
)

// Defaults of Options, shared with the operator's flags.
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
	Recorder  events.EventRecorder
	Leases    *lease.Manager
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

// Reconcile moves one NodeMaintenance one bounded step forward.
func (r *NodeMaintenanceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	if errors.Is(err, errPassEnded) {
		return res, nil
	}
	return res, err
}

func (r *NodeMaintenanceReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	nm := &nmv1beta1.NodeMaintenance{}
	if err := r.Client.Get(ctx, req.NamespacedName, nm); err != nil {
		if apierrors.IsNotFound(err) {
			r.Pods.Release(req.Name)
			r.releaseAdmission(ctx, "", req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	nm = r.newest(nm)
	if !drains(nm) {
		r.Pods.Release(nm.Name)
	}
	if !nm.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, nm)
	}
	if !controllerutil.ContainsFinalizer(nm, nmv1beta1.NodeMaintenanceFinalizer) {
		controllerutil.AddFinalizer(nm, nmv1beta1.NodeMaintenanceFinalizer)
		replaced := nm.ResourceVersion
		if err := r.Client.Update(ctx, nm); err != nil {
			return requeueOnConflict(err)
		}
		r.wrote(replaced, nm)
	}
	if restorePending(nm) {
		// A restore that a pass began and could not finish.
		return r.finishRestore(ctx, r.newScope(nm))
	}
	switch nm.Status.Phase {
	case nmv1beta1.MaintenanceFailed:
		// Terminal: the node was never touched, has been restored, or is
		// left in maintenance until the object is deleted (spec.drain
		// onTimeout Fail, or its recorded state unreadable). Nothing to retry.
		return ctrl.Result{}, nil
	case nmv1beta1.MaintenanceSucceeded:
		return r.keepMaintenance(ctx, nm)
	}
	return r.maintain(ctx, nm)
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

// errPassEnded is returned by a step that ended the pass on purpose with its
// result: the maintenance failed, or its object is gone. Reconcile returns
// the result without an error.
var errPassEnded = errors.New("reconcile pass ended")

// ended reports whether a step ended the pass: with an error (errPassEnded
// included) or a requeue. A step lets the pass go on with a zero result and
// no error.
func ended(res ctrl.Result, err error) bool { return err != nil || !res.IsZero() }

// requeueOnConflict ends the pass after a failed write: soon again after a
// conflict, not at all when the object is gone.
func requeueOnConflict(err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		// Someone (often our own previous pass) changed the object; the watch
		// brings the new version, the short requeue is the safety net.
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, errPassEnded
	}
	return ctrl.Result{}, err
}

func (r *NodeMaintenanceReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
