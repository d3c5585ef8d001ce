// Package rollout reconciles NodeMaintenanceRollouts: it maintains the nodes
// of a set a few at a time, each through a child NodeMaintenance that it
// creates and deletes (the NodeMaintenance controller does the lease, the
// cordon, the drain and the exact restore), runs a step Job on each drained
// node, waits for the workloads evicted from each restored node to recover,
// soaks it, and halts on failure.
//
// The semantics, decided for issue #28 (the recovery gate for #29):
//
//   - The node set is resolved once, when status.nodes is empty: the nodes
//     spec.nodeSelector matches, by name, or spec.nodeNames in order. A named
//     node that does not exist, or a selector that matches none, halts the
//     rollout before anything starts. Nodes that join later are not added.
//     Each row gets its wave, index/maxUnavailable+1, with maxUnavailable as
//     it was resolved then.
//   - maxUnavailable (default 1) is a count or a percentage of the set,
//     rounded down, at least 1 (validation.MaxUnavailableNodes). A node of
//     the set is out of service when its row is Draining, StepRunning,
//     Holding, Restoring, Recovering or Soaking, or when it is unschedulable
//     or NotReady, or a NodeMaintenance (ours, failed and held, or someone
//     else's) holds it. The next Waiting row, in order, starts only while fewer than
//     maxUnavailable nodes are out of service, and not while the rollout is
//     paused, halted or deleted. A Waiting node out of service already
//     (cordoned by hand, NotReady) starts even when the slots are taken:
//     that takes nothing more out of service.
//   - Every decision is taken from the rollout read live from the API
//     server and the cluster, never from memory, and the status is written
//     before what it decides is done: a row is written Draining, with its
//     child's name and its workloads, before the child is created;
//     StepRunning before its Job
//     is created; Restoring before its child is deleted. Children and Jobs
//     have deterministic names (<rollout>-<node>, hash-shortened when too
//     long), and are got-or-created, so a pass that crashed between the two
//     finds them instead of making a second one, and a restarted operator
//     never exceeds maxUnavailable.
//   - A node held by a NodeMaintenance this rollout does not own stays
//     Waiting, its row's waitingFor naming it, and is taken once it is gone.
//   - Child Succeeded: DrainedAt, then the step Job (StepRunning) or the hold
//     (Holding, until DrainedAt+holdFor). The Job completed: StepFinishedAt,
//     the child is deleted (Restoring). The Job failed, or ran longer than
//     step.timeout from its creation: the node failed. Child Failed: the node
//     failed with the child's lastError.
//   - A state that only waits for a timer (Holding, Soaking) is passed
//     through in the pass that enters it when its time is up already (no
//     holdFor, no soakFor left): one status write, not one per state, and
//     a Done row's slot goes to the next node in that same pass (advance).
//     Any other state entered waits for the next pass.
//   - Restoring ends when the child is gone (its finalizer restored the node
//     exactly: a node cordoned by hand before stays cordoned) and the node
//     is Ready (RestoredAt); then Recovering, then Soaking, then Done. A node
//     holds its slot until Done.
//   - The recovery gate. When a row starts, its workloads are recorded: the
//     node's pods are read live (field selector spec.nodeName), classified
//     by the drain's own rules (drain.NewPlan with spec.drain, the node, the
//     cordon taken to happen now, as the preview does), and the controllers
//     of the pods to evict are kept as "Kind namespace/name": a ReplicaSet
//     a Deployment controls as the Deployment, other ReplicaSets and
//     StatefulSets as themselves; bare pods, Jobs, DaemonSets and other
//     controllers are not waited for. Recovering lasts until the node is
//     Ready and every recorded workload is fully available, as its
//     controller's status says once it has seen the latest spec
//     (observedGeneration): a Deployment with availableReplicas and
//     updatedReplicas at spec.replicas, a ReplicaSet with availableReplicas,
//     a StatefulSet with availableReplicas and readyReplicas. A workload
//     that no longer exists is recovered; one that cannot be read is not.
//     waitingForWorkloads names the others with their availability, and
//     status.blockers names them while the next node waits for the slot.
//     Then RecoveredAt, and Soaking. recoveryGate NodeReady skips the
//     workloads: Recovering ends as soon as it starts. Past recoveryTimeout
//     (default 10m) from RestoredAt the node fails ("workloads not
//     recovered within recoveryTimeout ...", naming them), and onFailure
//     decides (Halt halts, Continue counts it toward maxFailures; the node
//     is restored already). The workloads are read with a get each, every
//     few seconds (recoveryRetry) while a row recovers: no watch of every
//     Deployment, ReplicaSet and StatefulSet of the cluster.
//   - soakFor counts from RestoredAt, not from RecoveredAt: recovery and
//     soak overlap, and a node is Done at the later of RecoveredAt and
//     RestoredAt+soakFor. So soakFor is the least time a restored node is
//     watched, and recoveryTimeout the most time its workloads are given.
//   - onFailure Halt (default): the rollout halts at the first failure; the
//     failed node's child is left as it is (the node stays as its maintenance
//     left it), the nodes in progress finish. onFailure Continue: the failed
//     node's child (and Job) is deleted, so the node is restored, and the
//     rollout halts once more than maxFailures (default 0) nodes failed.
//   - paused starts no new node (phase Paused); in-progress nodes finish.
//   - Gates (issue #29) are asked, in order, when a Waiting row could start
//     (not paused, not halted); the first closed one holds every Waiting
//     row, the later ones are not asked, and nodes in progress go on. The
//     Gated condition (True with the gate's reason, False "GatesOpen") and
//     a line of status.blockers say which gate holds and why.
//   - The window gate (spec.window, api/v1alpha1/window): closed outside the
//     window, reason OutsideWindow; status.nextWindowStart is the next
//     opening, and the pass is asked for again at it, or within 5 minutes
//     if that is sooner (a clock that jumps, a window changed by hand). A
//     window belongs to the day it starts on; start and end are wall-clock
//     times of its zone (a start skipped by a spring-forward change opens at
//     the first instant after the gap; a fall-back night opens it once).
//   - The Prometheus gate (spec.gates.prometheus), after the window: an
//     instant query to <url>/api/v1/query, 10 s timeout, Go's default
//     transport (proxy from the environment). Open only on a success with
//     no series; series: reason AlertFiring, naming the query, the count and
//     the first series' labels; no trustworthy answer (unreachable, non-2xx,
//     an error status, not Prometheus's JSON): reason PrometheusUnreachable
//     with the error. Closed, it is asked again every 15 s (gateRetry).
//   - Succeeded: every row Done or Failed, and not halted.
//   - Deletion: the finalizer deletes every child and Job and waits until the
//     children are gone (their own finalizers restore the nodes).
//   - Node condition MaintenancePlanned (KEP-5683; rollout_planned.go): True
//     on each Waiting node while the rollout is Progressing or Paused
//     (reason MaintenanceWindow with spec.window, AdminRequested without),
//     handed to the node's child when it starts (the child takes it off in
//     the patch that first says MaintenanceInProgress), removed from a node
//     past Draining and from every node when the rollout halts, succeeds or
//     is deleted; a MaintenancePlanned someone else wrote is left alone.
//
// A pass is a list of phases run in order, as in the NodeMaintenance
// controller. The files follow it: controller (types, Reconcile, the
// pass), phases (the scope and the runner), setup (watches), resolve (the
// node set), slots (maxUnavailable and who starts), nodes (what the cluster
// says, and each row's state machine), workloads (what a row records and
// reads for its recovery), recovery (the Recovering state, availability,
// its blockers), children (the child
// NodeMaintenances), step (the step Jobs), act (what a written status asks
// for), status (phase, counts, conditions, the write, events), planned (the
// nodes' MaintenancePlanned condition), finalize (deletion), gates (the gate
// phase), window and prometheus (the gates).
package rollout

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/nodewrites"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/notify"
)

// Event reasons of a rollout.
const (
	ReasonNodeStarted = "RolloutNodeStarted"
	ReasonNodeDone    = "RolloutNodeDone"
	ReasonNodeFailed  = "RolloutNodeFailed"
	ReasonHalted      = "RolloutHalted"
	ReasonCompleted   = "RolloutCompleted"
)

// conflictRetry is the retry after a write lost a race with another writer.
const conflictRetry = 100 * time.Millisecond

// RolloutReconciler reconciles NodeMaintenanceRollout objects.
type RolloutReconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads the rollout itself live whenever the cache may be
	// behind what this controller last wrote (read), so that every decision
	// is taken from the status last written, never from a stale cache.
	APIReader client.Reader
	// Recent is this process's recent writes of nodes (nodewrites), shared
	// with the NodeMaintenance controller: the MaintenancePlanned patches
	// read the nodes as those writes left them. Nil reads the cache as it is.
	Recent   *nodewrites.Recent
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	// SkipNameValidation allows several managers in one process (tests that
	// restart the operator in-process).
	SkipNameValidation bool
	// Now is the clock, for tests.
	Now func() time.Time
	// Notify sends the notifications of spec.notify; nil sends none.
	Notify *notify.Sender
	// Secrets reads the Secrets of spec.notify[].secretRef, in Namespace,
	// the operator's own.
	Secrets   client.Reader
	Namespace string

	// known maps each rollout to the resourceVersion this controller last
	// read live or wrote (read).
	known sync.Map
	// deleted are the children and Jobs this controller deleted moments
	// ago (deleteObject), by UID; created, those it created (create).
	deleted recentWrites[types.UID]
	created recentWrites[string]
}

// The rollout is read live (get) and from the cache (list, watch, for the
// Node watch's map); its finalizer is set with an update of the object; the
// finalizers subresource lets its children and Jobs block its deletion.
// Children are created and deleted here; the NodeMaintenance controller's
// grants already cover list and watch. Jobs: only what the step needs
// (read from the cache, created with no get before: AlreadyExists is data).
//
// +kubebuilder:rbac:groups=nodemaintenance.io,resources=nodemaintenancerollouts,verbs=get;list;watch;update
// +kubebuilder:rbac:groups=nodemaintenance.io,resources=nodemaintenancerollouts/status,verbs=update
// +kubebuilder:rbac:groups=nodemaintenance.io,resources=nodemaintenancerollouts/finalizers,verbs=update
// +kubebuilder:rbac:groups=nodemaintenance.medik8s.io,resources=nodemaintenances,verbs=create;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=create;list;watch;delete

// Reconcile moves one rollout one bounded step forward.
func (r *RolloutReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ro, err := r.read(ctx, req.NamespacedName)
	if err != nil {
		if apierrors.IsNotFound(err) {
			r.known.Delete(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// What the pass leaves is the version it wrote last, or the one it read.
	defer func() { r.known.Store(req.NamespacedName, ro.ResourceVersion) }()
	s := &scope{ro: ro, status: ro.Status.DeepCopy(), old: ro.Status.DeepCopy(), now: r.now(), failures: map[string]string{}}
	if !ro.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, s)
	}
	return runPhases(ctx, s, []phase{r.addFinalizer, r.resolve, r.observe, r.advanceRows, r.checkGates, r.startNodes, r.recordWorkloads, r.summarize, r.writeStatus, r.act, r.emitEvents, r.markPlanned})
}

// read returns the rollout from the cache when the cache holds the very
// version this controller last read live or wrote, and live otherwise: a
// cache that has not caught up with the last status write (or that shows a
// version someone else wrote) is never decided on. A pass that follows the
// event of its own last write reads no more than the cache, one round trip
// off a pass that is a chain of them.
func (r *RolloutReconciler) read(ctx context.Context, key types.NamespacedName) (*nmv1alpha1.NodeMaintenanceRollout, error) {
	if version, ok := r.known.Load(key); ok {
		cached := &nmv1alpha1.NodeMaintenanceRollout{}
		if err := r.Client.Get(ctx, key, cached); err == nil && cached.ResourceVersion == version {
			return cached, nil
		}
	}
	ro := &nmv1alpha1.NodeMaintenanceRollout{}
	if err := r.APIReader.Get(ctx, key, ro); err != nil {
		return nil, err
	}
	return ro, nil
}

// addFinalizer comes first, written at once: no child may exist whose
// rollout could be deleted without restoring it.
func (r *RolloutReconciler) addFinalizer(ctx context.Context, s *scope) (ctrl.Result, error) {
	if controllerutil.ContainsFinalizer(s.ro, nmv1alpha1.RolloutFinalizer) {
		return ctrl.Result{}, nil
	}
	controllerutil.AddFinalizer(s.ro, nmv1alpha1.RolloutFinalizer)
	if err := r.Client.Update(ctx, s.ro); err != nil {
		return writeFailed(s, err)
	}
	return ctrl.Result{}, nil
}

func (r *RolloutReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// writeFailed ends the pass after a failed write: soon again after a
// conflict, at once when the rollout is gone, with the error otherwise.
func writeFailed(s *scope, err error) (ctrl.Result, error) {
	s.end()
	switch {
	case apierrors.IsConflict(err):
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}
