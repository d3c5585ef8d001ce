// Package controller reconciles NodeMaintenance objects: it holds the node
// lease, cordons and taints the node, drains it through the Eviction API, keeps
// the status live, and restores the node exactly when the object is deleted.
package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/drain"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/nodestate"
)

// Index names registered with the manager's field indexer.
const (
	// PodNodeNameIndex indexes pods by spec.nodeName.
	PodNodeNameIndex = "spec.nodeName"
	// MaintenanceNodeNameIndex indexes NodeMaintenances by spec.nodeName.
	MaintenanceNodeNameIndex = "spec.nodeName"
)

// Event reasons.
const (
	ReasonBeginMaintenance     = "BeginMaintenance"
	ReasonSucceededMaintenance = "SucceedMaintenance"
	ReasonFailedMaintenance    = "FailedMaintenance"
	ReasonRemovedMaintenance   = "RemovedMaintenance"
	ReasonCordon               = "Cordon"
	ReasonUncordon             = "Uncordon"
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

const (
	// evictedRecently bounds how long a pod we evicted is trusted to be on its way
	// out while the cache has not shown its deletionTimestamp yet.
	evictedRecently = 30 * time.Second
	// conflictRetry is the retry after a write lost a race with another writer.
	conflictRetry = 100 * time.Millisecond
)

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
	Evictor   drain.Evictor
	Options   Options
	// Now is the clock, for tests.
	Now func() time.Time

	mu    sync.Mutex
	state map[types.UID]*progress
}

// progress is what one NodeMaintenance's reconciles remember between passes.
// Reconciles of one object never run concurrently, so only the map needs the lock.
type progress struct {
	evicted         map[types.UID]time.Time
	blockedBackoff  time.Duration
	lastLeaseFailed time.Time
}

// The RBAC below is what the operator's API calls need and no more; the
// provider's TestAccOperatorRunsAsItsServiceAccount checks in the API server's
// audit log that each verb is used. Reads of NodeMaintenances, pods, PDBs
// and leases go through the informer cache, which watches (and lists, on API
// servers that do not stream a watch's initial list) but never gets.
// Nodes are also read directly, after a conflict and by the webhook.
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
	nm := &nmv1beta1.NodeMaintenance{}
	if err := r.Client.Get(ctx, req.NamespacedName, nm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !nm.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, nm)
	}
	if !controllerutil.ContainsFinalizer(nm, nmv1beta1.NodeMaintenanceFinalizer) {
		controllerutil.AddFinalizer(nm, nmv1beta1.NodeMaintenanceFinalizer)
		if err := r.Client.Update(ctx, nm); err != nil {
			return requeueOnConflict(err)
		}
	}
	switch nm.Status.Phase {
	case nmv1beta1.MaintenanceFailed:
		// Terminal: the node was never touched or has been restored. Deleting
		// the NodeMaintenance cleans up; nothing to retry.
		return ctrl.Result{}, nil
	case nmv1beta1.MaintenanceSucceeded:
		return r.keepMaintenance(ctx, nm)
	}
	return r.maintain(ctx, nm)
}

// observed is what every pass of an active maintenance starts from.
type observed struct {
	status  *nmv1beta1.NodeMaintenanceStatus
	prior   nodestate.Prior
	touched bool
	node    *corev1.Node
}

// observe reads the prior state and the node and holds the lease. When it
// reports done, the pass ends with its result: the node is gone (Failed), or
// the lease is not held (recorded in status).
func (r *NodeMaintenanceReconciler) observe(ctx context.Context, nm *nmv1beta1.NodeMaintenance) (*observed, ctrl.Result, bool, error) {
	o := &observed{status: nm.Status.DeepCopy()}
	var err error
	if o.prior, o.touched, err = priorState(nm); err != nil {
		res, err := r.fail(ctx, nm, o.status, err.Error())
		return nil, res, true, err
	}
	o.node = &corev1.Node{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: nm.Spec.NodeName}, o.node); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, ctrl.Result{}, true, fmt.Errorf("read node %s: %w", nm.Spec.NodeName, err)
		}
		msg := fmt.Sprintf("node %s does not exist; delete this NodeMaintenance and create one for an existing node", nm.Spec.NodeName)
		if o.touched {
			msg = fmt.Sprintf("node %s was deleted during the maintenance; delete this NodeMaintenance to clean up", nm.Spec.NodeName)
		}
		res, err := r.fail(ctx, nm, o.status, msg)
		return nil, res, true, err
	}
	if res, done, err := r.holdLease(ctx, nm, o.node, o.status, o.touched, o.prior); done {
		return nil, res, true, err
	}
	return o, ctrl.Result{}, false, nil
}

// maintain is the Running phase: lease, cordon, drain, status.
func (r *NodeMaintenanceReconciler) maintain(ctx context.Context, nm *nmv1beta1.NodeMaintenance) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	o, res, done, err := r.observe(ctx, nm)
	if done {
		return res, err
	}
	status, prior, touched, node := o.status, o.prior, o.touched, o.node

	if !touched {
		prior = nodestate.Record(node, r.now())
		if nm.Annotations == nil {
			nm.Annotations = map[string]string{}
		}
		nm.Annotations[nodestate.PriorStateAnnotation] = prior.Encode()
		// The prior state is on the NodeMaintenance before the node changes, so
		// a crash between the two can never lose it.
		if err := r.Client.Update(ctx, nm); err != nil {
			return requeueOnConflict(err)
		}
	}
	if !nodestate.InMaintenance(node) {
		if err := r.patchNode(ctx, node.Name, nodestate.ApplyMaintenance); err != nil {
			return ctrl.Result{}, err
		}
		r.Recorder.Eventf(node, nm, corev1.EventTypeNormal, ReasonCordon, "Cordon",
			"Node cordoned and tainted for maintenance %s", nm.Name)
	}

	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.MatchingFields{PodNodeNameIndex: node.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list pods on node %s: %w", node.Name, err)
	}
	plan := drain.NewPlan(pods.Items, drain.Filters(prior.CordonedAt, nodestate.MaintenanceTaints))
	// The counts are taken when the drain starts: the pass that first touches
	// the node (a wait for the lease before it may already have set the
	// phase), or a later one if that pass could not write its status.
	if !touched || (status.TotalPods == 0 && status.EvictionPods == 0) {
		status.Phase = nmv1beta1.MaintenanceRunning
		status.TotalPods = len(pods.Items)
		status.EvictionPods = len(plan.Pending())
		r.Recorder.Eventf(nm, nil, corev1.EventTypeNormal, ReasonBeginMaintenance, "BeginMaintenance",
			"Maintenance of node %s started: %d pods on the node, %d to evict", node.Name, status.TotalPods, status.EvictionPods)
	}

	p := r.progressOf(nm)
	results := drain.Evict(ctx, r.Evictor, p.notEvictedYet(plan.ToEvict, r.now()), r.Options.EvictionParallelism)
	blocked, failed := 0, 0
	var problems []string
	for _, res := range results {
		evictions.WithLabelValues(string(res.Outcome)).Inc()
		switch res.Outcome {
		case drain.Evicted:
			p.evicted[res.UID] = r.now()
		case drain.Blocked:
			blocked++
			evictionFailures.WithLabelValues(string(policyv1.DisruptionBudgetCause)).Inc()
			problems = append(problems, fmt.Sprintf("pod %s is blocked by a PodDisruptionBudget: %s", res.Pod, res.Message))
		case drain.Failed:
			failed++
			evictionFailures.WithLabelValues(string(apierrors.ReasonForError(res.Err))).Inc()
			problems = append(problems, res.Message)
		}
	}
	if blocked > 0 {
		// A budget held by an eviction that was cut off is the one refusal
		// that needs no one to act and ends on its own: say so first.
		problems = append(r.interruptedEvictions(ctx, results), problems...)
		r.Recorder.Eventf(nm, nil, corev1.EventTypeWarning, ReasonEvictionBlocked, "Evict", "%s", problems[0])
	}

	pending := pendingAfter(plan, results)
	setPending(status, pending)
	status.DrainProgress = drainProgress(status.EvictionPods, len(pending))
	status.LastError = summarize(problems)
	status.ErrorOnLeaseCount = 0
	if len(pending) == 0 {
		status.Phase = nmv1beta1.MaintenanceSucceeded
		status.DrainProgress = 100
		status.LastError = ""
	}
	if err := r.writeStatus(ctx, nm, status); err != nil {
		return requeueOnConflict(err)
	}
	if status.Phase == nmv1beta1.MaintenanceSucceeded {
		drainDuration.Observe(r.now().Sub(nm.CreationTimestamp.Time).Seconds())
		r.Recorder.Eventf(nm, nil, corev1.EventTypeNormal, ReasonSucceededMaintenance, "Drain",
			"Node %s is cordoned and drained", node.Name)
		logger.Info("maintenance succeeded", "node", node.Name)
		return ctrl.Result{RequeueAfter: r.Leases.RenewInterval()}, nil
	}

	// Pod deletions and PDB changes wake us through watches; the requeue is the
	// safety net, with a backoff so a PDB that never allows does not spin.
	next := r.Leases.RenewInterval()
	if blocked > 0 || failed > 0 {
		next = min(next, p.nextBlockedBackoff(r.Options))
	} else {
		p.blockedBackoff = 0
		next = min(next, evictedRecently)
	}
	logger.V(1).Info("drain pass", "node", node.Name, "pending", len(pending), "blocked", blocked, "failed", failed, "requeueAfter", next)
	return ctrl.Result{RequeueAfter: next}, nil
}

// interruptedEvictions explains the budgets of the blocked pods that are
// charged for a pod that never left (drain.InterruptedEvictions), from the
// cache. It is only an explanation: a read that fails leaves it out.
func (r *NodeMaintenanceReconciler) interruptedEvictions(ctx context.Context, results []drain.EvictionResult) []string {
	namespaces := map[string]bool{}
	for _, res := range results {
		if res.Outcome == drain.Blocked {
			namespaces[res.Pod.Namespace] = true
		}
	}
	running := func(key types.NamespacedName) bool {
		pod := &corev1.Pod{}
		return r.Client.Get(ctx, key, pod) == nil && pod.DeletionTimestamp == nil
	}
	var out []string
	for _, ns := range slices.Sorted(maps.Keys(namespaces)) {
		pdbs := &policyv1.PodDisruptionBudgetList{}
		if err := r.Client.List(ctx, pdbs, client.InNamespace(ns)); err != nil {
			log.FromContext(ctx).V(1).Info("cannot read the PodDisruptionBudgets of a blocked pod", "namespace", ns, "error", err.Error())
			continue
		}
		for _, e := range drain.InterruptedEvictions(pdbs.Items, running, r.now()) {
			out = append(out, e.String())
		}
	}
	return out
}

// keepMaintenance holds the lease of a drained node for as long as the
// maintenance lasts.
func (r *NodeMaintenanceReconciler) keepMaintenance(ctx context.Context, nm *nmv1beta1.NodeMaintenance) (ctrl.Result, error) {
	o, res, done, err := r.observe(ctx, nm)
	if done {
		return res, err
	}
	status := o.status
	if status.ErrorOnLeaseCount != 0 || status.LastError != "" {
		status.ErrorOnLeaseCount, status.LastError = 0, ""
		if err := r.writeStatus(ctx, nm, status); err != nil {
			return requeueOnConflict(err)
		}
	}
	return ctrl.Result{RequeueAfter: r.Leases.RenewInterval()}, nil
}

// holdLease obtains or renews the node lease. When it cannot, it records why
// and reports done: the caller returns the result. After the node was touched,
// each failure counts; more than nmv1beta1.MaxLeaseErrors restore the node and fail.
func (r *NodeMaintenanceReconciler) holdLease(ctx context.Context, nm *nmv1beta1.NodeMaintenance, node *corev1.Node,
	status *nmv1beta1.NodeMaintenanceStatus, touched bool, prior nodestate.Prior) (ctrl.Result, bool, error) {
	p := r.progressOf(nm)
	if !p.lastLeaseFailed.IsZero() && r.now().Sub(p.lastLeaseFailed) < r.Options.LeaseRetryInterval {
		// Pod events may wake us often; a lease failure is retried (and
		// counted) at most once per interval.
		return ctrl.Result{RequeueAfter: r.Options.LeaseRetryInterval - r.now().Sub(p.lastLeaseFailed)}, true, nil
	}
	err := r.Leases.Obtain(ctx, node.Name)
	if err == nil {
		p.lastLeaseFailed = time.Time{}
		return ctrl.Result{}, false, nil
	}
	p.lastLeaseFailed = r.now()
	if status.Phase == "" {
		status.Phase = nmv1beta1.MaintenanceRunning
	}
	status.LastError = err.Error()
	if touched {
		status.ErrorOnLeaseCount++
	}
	var held *lease.HeldError
	if errors.As(err, &held) || touched {
		r.Recorder.Eventf(nm, nil, corev1.EventTypeWarning, ReasonLeaseNotHeld, "Lease", "%s", err.Error())
	}
	if touched && status.ErrorOnLeaseCount > nmv1beta1.MaxLeaseErrors {
		if rerr := r.restoreNode(ctx, nm, node.Name, prior); rerr != nil {
			return ctrl.Result{}, true, rerr
		}
		res, ferr := r.fail(ctx, nm, status, fmt.Sprintf(
			"could not hold the lease on node %s %d times in a row (last error: %v); the node was restored and the maintenance stopped. Delete this NodeMaintenance and create it again to retry",
			node.Name, status.ErrorOnLeaseCount, err))
		return res, true, ferr
	}
	if werr := r.writeStatus(ctx, nm, status); werr != nil {
		res, cerr := requeueOnConflict(werr)
		return res, true, cerr
	}
	return ctrl.Result{RequeueAfter: r.Options.LeaseRetryInterval}, true, nil
}

// finalize restores the node, releases the lease and lets the object go.
func (r *NodeMaintenanceReconciler) finalize(ctx context.Context, nm *nmv1beta1.NodeMaintenance) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(nm, nmv1beta1.NodeMaintenanceFinalizer) {
		r.forget(nm)
		return ctrl.Result{}, nil
	}
	prior, touched, err := priorState(nm)
	if err != nil {
		// Without the prior state the safest restore is "as before any maintenance":
		// uncordoned, our taints and label removed.
		log.FromContext(ctx).Error(err, "restoring node with default prior state", "node", nm.Spec.NodeName)
		prior, touched = nodestate.Prior{}, true
	}
	if touched {
		if err := r.restoreNode(ctx, nm, nm.Spec.NodeName, prior); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.Leases.Release(ctx, nm.Spec.NodeName); err != nil {
		return ctrl.Result{}, err
	}
	controllerutil.RemoveFinalizer(nm, nmv1beta1.NodeMaintenanceFinalizer)
	if err := r.Client.Update(ctx, nm); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return requeueOnConflict(err)
	}
	r.Recorder.Eventf(nm, nil, corev1.EventTypeNormal, ReasonRemovedMaintenance, "Restore",
		"Maintenance of node %s ended; the node was restored", nm.Spec.NodeName)
	r.forget(nm)
	return ctrl.Result{}, nil
}

// restoreNode puts the node back as recorded and removes the record, so a
// later restore never undoes what someone did to the node afterwards.
func (r *NodeMaintenanceReconciler) restoreNode(ctx context.Context, nm *nmv1beta1.NodeMaintenance, nodeName string, prior nodestate.Prior) error {
	err := r.patchNode(ctx, nodeName, func(n *corev1.Node) bool { return nodestate.Restore(n, prior) })
	switch {
	case apierrors.IsNotFound(err):
		// The node is gone: nothing to restore.
	case err != nil:
		return err
	default:
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}
		note := "Node restored: maintenance taints and label removed"
		if !prior.Unschedulable {
			note = "Node uncordoned: maintenance taints and label removed"
		}
		r.Recorder.Eventf(node, nm, corev1.EventTypeNormal, ReasonUncordon, "Uncordon", "%s (maintenance %s)", note, nm.Name)
	}
	if _, ok := nm.Annotations[nodestate.PriorStateAnnotation]; ok {
		delete(nm.Annotations, nodestate.PriorStateAnnotation)
		if err := r.Client.Update(ctx, nm); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("clear the prior node state of NodeMaintenance %s: %w", nm.Name, err)
		}
	}
	return nil
}

// patchNode applies change to the node with a merge patch guarded by the
// resourceVersion: taints are a list, and a concurrent change to it must make
// us re-read and retry rather than overwrite someone else's taint.
func (r *NodeMaintenanceReconciler) patchNode(ctx context.Context, name string, change func(*corev1.Node) bool) error {
	var reader client.Reader = r.Client
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		node := &corev1.Node{}
		if err := reader.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		orig := node.DeepCopy()
		if !change(node) {
			return nil
		}
		lastErr = r.Client.Patch(ctx, node, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
		if lastErr == nil || !apierrors.IsConflict(lastErr) {
			break
		}
		// The cache was behind; read the live node.
		reader = r.APIReader
	}
	if lastErr != nil {
		return fmt.Errorf("patch node %s: %w", name, lastErr)
	}
	return nil
}

func (r *NodeMaintenanceReconciler) fail(ctx context.Context, nm *nmv1beta1.NodeMaintenance, status *nmv1beta1.NodeMaintenanceStatus, msg string) (ctrl.Result, error) {
	status.Phase = nmv1beta1.MaintenanceFailed
	status.LastError = msg
	if err := r.writeStatus(ctx, nm, status); err != nil {
		return requeueOnConflict(err)
	}
	r.Recorder.Eventf(nm, nil, corev1.EventTypeWarning, ReasonFailedMaintenance, "Maintain", "%s", msg)
	log.FromContext(ctx).Info("maintenance failed", "node", nm.Spec.NodeName, "reason", msg)
	return ctrl.Result{}, nil
}

// writeStatus writes status when it changed, stamping lastUpdate.
func (r *NodeMaintenanceReconciler) writeStatus(ctx context.Context, nm *nmv1beta1.NodeMaintenance, status *nmv1beta1.NodeMaintenanceStatus) error {
	status.LastUpdate = nm.Status.LastUpdate
	status.LastError = boundedError(status.LastError)
	if equalStatus(&nm.Status, status) {
		return nil
	}
	status.LastUpdate = metav1.NewTime(r.now())
	nm.Status = *status
	return r.Client.Status().Update(ctx, nm)
}

func (r *NodeMaintenanceReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *NodeMaintenanceReconciler) progressOf(nm *nmv1beta1.NodeMaintenance) *progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state == nil {
		r.state = map[types.UID]*progress{}
	}
	p, ok := r.state[nm.UID]
	if !ok {
		p = &progress{evicted: map[types.UID]time.Time{}}
		r.state[nm.UID] = p
	}
	return p
}

func (r *NodeMaintenanceReconciler) forget(nm *nmv1beta1.NodeMaintenance) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.state, nm.UID)
}

// notEvictedYet drops pods this process evicted moments ago whose
// deletionTimestamp the cache has not shown yet, so no pod is evicted twice.
func (p *progress) notEvictedYet(pods []corev1.Pod, now time.Time) []corev1.Pod {
	out := pods[:0:0]
	for _, pod := range pods {
		if at, ok := p.evicted[pod.UID]; ok && now.Sub(at) < evictedRecently {
			continue
		}
		out = append(out, pod)
	}
	for uid, at := range p.evicted {
		if now.Sub(at) >= evictedRecently {
			delete(p.evicted, uid)
		}
	}
	return out
}

func (p *progress) nextBlockedBackoff(o Options) time.Duration {
	if p.blockedBackoff == 0 {
		p.blockedBackoff = o.BlockedBackoffInitial
	} else {
		p.blockedBackoff = min(2*p.blockedBackoff, o.BlockedBackoffMax)
	}
	return p.blockedBackoff
}

func priorState(nm *nmv1beta1.NodeMaintenance) (nodestate.Prior, bool, error) {
	v, ok := nm.Annotations[nodestate.PriorStateAnnotation]
	if !ok {
		return nodestate.Prior{}, false, nil
	}
	p, err := nodestate.Decode(v)
	if err != nil {
		return nodestate.Prior{}, true, fmt.Errorf("NodeMaintenance %s: %w", nm.Name, err)
	}
	return p, true, nil
}

func requeueOnConflict(err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		// Someone (often our own previous pass) changed the object; the watch
		// brings the new version, the short requeue is the safety net.
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}

// SetupWithManager registers the indexes, watches and the controller.
func (r *NodeMaintenanceReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	r.Options.defaults()
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, PodNodeNameIndex, func(o client.Object) []string {
		if n := o.(*corev1.Pod).Spec.NodeName; n != "" {
			return []string{n}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &nmv1beta1.NodeMaintenance{}, MaintenanceNodeNameIndex, func(o client.Object) []string {
		return []string{o.(*nmv1beta1.NodeMaintenance).Spec.NodeName}
	}); err != nil {
		return err
	}
	registerMetrics(mgr.GetCache())

	byNode := func(ctx context.Context, nodeName string) []reconcile.Request {
		if nodeName == "" {
			return nil
		}
		list := &nmv1beta1.NodeMaintenanceList{}
		if err := r.Client.List(ctx, list, client.MatchingFields{MaintenanceNodeNameIndex: nodeName}); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
		}
		return reqs
	}
	running := func(ctx context.Context, _ client.Object) []reconcile.Request {
		list := &nmv1beta1.NodeMaintenanceList{}
		if err := r.Client.List(ctx, list); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for i := range list.Items {
			if list.Items[i].Status.Phase == nmv1beta1.MaintenanceRunning {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
			}
		}
		return reqs
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodemaintenance").
		For(&nmv1beta1.NodeMaintenance{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return byNode(ctx, o.(*corev1.Pod).Spec.NodeName)
		}), builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.(*corev1.Pod).Spec.NodeName != ""
		}))).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return byNode(ctx, o.GetName())
		})).
		Watches(&policyv1.PodDisruptionBudget{}, handler.EnqueueRequestsFromMapFunc(running)).
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			if o.GetNamespace() != lease.Namespace {
				return nil
			}
			node, ok := lease.NodeName(o.GetName())
			if !ok {
				return nil
			}
			return byNode(ctx, node)
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Options.MaxConcurrentReconciles, SkipNameValidation: &r.Options.SkipNameValidation}).
		Complete(r)
}
