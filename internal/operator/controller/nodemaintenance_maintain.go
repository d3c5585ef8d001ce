package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/nodeguard"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/notify"
)

// maintain is the Running pass: a slot under --max-unavailable, the lease,
// the cordon, one drain round, its status.
func (r *NodeMaintenanceReconciler) maintain() []phase {
	return slices.Concat(
		[]phase{r.waitForSlot, r.holdPods},
		r.observe(),
		[]phase{r.enterMaintenance, r.planDrain, r.evictRound, r.onTimeout, r.setDrainStatus, r.markRound, r.afterRound},
	)
}

// observe reads the recorded prior state and the node, and holds the lease;
// a maintenance that another operator started is adopted once the lease is
// held (nodemaintenance_takeover.go). It ends the pass when the maintenance
// cannot go on: the record is unreadable or the node is gone (Failed), or
// the lease is not held.
func (r *NodeMaintenanceReconciler) observe() []phase {
	return []phase{r.readRecord, r.readNode, r.detectTakeover, r.guard, r.holdLease, r.adopt}
}

// holdPods starts the informer of the node's pods: from here on the
// maintenance may drain, and the informer's first list comes in while the
// pass takes the lease, before the record counts the pods (countPods).
func (r *NodeMaintenanceReconciler) holdPods(_ context.Context, s *scope) (ctrl.Result, error) {
	r.Pods.Hold(s.nm.Name, s.nm.Spec.NodeName)
	return ctrl.Result{}, nil
}

// readRecord reads the prior-state record; one that cannot be read fails
// the maintenance.
func (r *NodeMaintenanceReconciler) readRecord(ctx context.Context, s *scope) (ctrl.Result, error) {
	var err error
	if s.prior, s.touched, err = priorState(s.nm); err != nil {
		// Restoring now would have to guess the node's schedulability from
		// before the maintenance; leaving it in maintenance loses nothing.
		return r.fail(ctx, s, fmt.Sprintf("%v. The node is left as the maintenance made it (cordoned and tainted): "+
			"without the record, uncordoning it could undo a cordon from before the maintenance. "+
			"Deleting this NodeMaintenance uncordons node %s and removes the maintenance taints and label", err, s.nm.Spec.NodeName))
	}
	return ctrl.Result{}, nil
}

// readNode reads the node; one that does not exist fails the maintenance.
func (r *NodeMaintenanceReconciler) readNode(ctx context.Context, s *scope) (ctrl.Result, error) {
	s.node = &corev1.Node{}
	if err := r.Recent.Get(ctx, r.Client, s.nm.Spec.NodeName, s.node); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("read node %s: %w", s.nm.Spec.NodeName, err)
		}
		msg := fmt.Sprintf("node %s does not exist; delete this NodeMaintenance and create one for an existing node", s.nm.Spec.NodeName)
		if s.touched {
			msg = fmt.Sprintf("node %s was deleted during the maintenance; delete this NodeMaintenance to clean up", s.nm.Spec.NodeName)
		}
		return r.fail(ctx, s, msg)
	}
	return ctrl.Result{}, nil
}

// guard fails a maintenance that has not touched its node yet when the node
// is a control-plane node or the last schedulable one and spec.drain does
// not allow it (validation.ValidateNodeGuards). The webhook refuses such a
// create; this catches what it could not see: a maintenance admitted while
// another node was still schedulable, or created without the webhook.
func (r *NodeMaintenanceReconciler) guard(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.touched || s.adopting {
		return ctrl.Result{}, nil
	}
	var listErr error
	err := validation.ValidateNodeGuards(s.node, s.nm.Spec.Drain, func() ([]corev1.Node, error) {
		var nodes []corev1.Node
		nodes, listErr = nodeguard.Nodes(ctx, r.Client, s.node.Name)
		return nodes, listErr
	})
	switch {
	case listErr != nil:
		return ctrl.Result{}, err // a read that failed: retried, nothing decided
	case err != nil:
		return r.fail(ctx, s, err.Error()+". Node "+s.nm.Spec.NodeName+" was not touched; delete this NodeMaintenance")
	}
	return ctrl.Result{}, nil
}

// enterMaintenance records the node's prior state on the NodeMaintenance,
// then cordons and taints the node. The record is written first, at once
// (mid-pass), with the finalizer (writeRecord), so a crash between the two
// can never lose it; it carries the node's pod counts (countPods), so a
// crash after the first evictions cannot lose them either. The lease is
// held by then (holdLease): the record is the node as it was before any
// maintenance, never as another holder of the lease left it.
func (r *NodeMaintenanceReconciler) enterMaintenance(ctx context.Context, s *scope) (ctrl.Result, error) {
	if !s.touched {
		prior := nodestate.Record(s.node, r.now())
		counts, res, err := r.countPods(ctx, s, prior.CordonedAt)
		if err != nil || !res.IsZero() {
			return res, err
		}
		prior.Pods = counts
		if res, err := r.writeRecord(ctx, s, prior); err != nil || !res.IsZero() || s.ended {
			return res, err
		}
		s.prior = prior
		r.notifyMaintenance(s.nm, notify.MaintenanceStarted, nil)
	}
	if nodestate.InMaintenance(s.node) {
		return ctrl.Result{}, nil
	}
	if s.touched {
		// A node this maintenance already cordoned is not in maintenance:
		// someone uncordoned it, or this pass reads a NodeMaintenance older
		// than a restore a pass just made. Cordon again only in the first
		// case: the live object tells them apart.
		live := &nmv1beta1.NodeMaintenance{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.nm), live); err != nil {
			if apierrors.IsNotFound(err) {
				// The object is gone, its node given back: nothing to cordon or drain.
				s.end()
				return ctrl.Result{}, nil
			}
			return ctrl.Result{}, err
		}
		if live.ResourceVersion != s.nm.ResourceVersion {
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
	}
	if err := r.patchNode(ctx, s.node.Name, nodestate.ApplyMaintenance); err != nil {
		return ctrl.Result{}, err
	}
	r.Recorder.Eventf(s.node, s.nm, corev1.EventTypeNormal, ReasonCordon, "Cordon",
		"Node cordoned and tainted for maintenance %s", s.nm.Name)
	return ctrl.Result{}, nil
}

// Until the informer of a node's pods has synced, a pass waits for it up to
// podsSyncWait (its first list normally takes milliseconds, and is mostly in
// by the time the pass has cordoned the node), then ends and comes back after
// podsSyncRetry, or sooner when the informer syncs (Changes).
const (
	podsSyncWait  = time.Second
	podsSyncRetry = time.Second
)

// planDrain reads the node's pods and classifies them (s.plan, readPlan).
// The pass that starts the drain counts them into the status and says so in
// an event.
func (r *NodeMaintenanceReconciler) planDrain(ctx context.Context, s *scope) (ctrl.Result, error) {
	pods, plan, res, err := r.readPlan(ctx, s, r.rules(s))
	if err != nil || !res.IsZero() {
		return res, err
	}
	s.plan = plan
	if s.prior.Adopted && s.status.TotalPods == 0 && s.status.EvictionPods > 0 {
		// The counts the other operator wrote are kept, but for its totalpods.
		s.status.TotalPods = adoptedTotal(len(pods), s.status.EvictionPods, len(plan.Pending()))
	}
	// The counts are taken when the drain starts: by the pass that first
	// touches the node (a wait for the lease before it may already have set
	// the phase), from the node as it cordoned it. A later pass finds none
	// when that pass could not write its status, and takes the record's.
	if !s.touched || (s.status.TotalPods == 0 && s.status.EvictionPods == 0) {
		s.status.Phase = nmv1beta1.MaintenanceRunning
		s.status.TotalPods = len(pods)
		s.status.EvictionPods = len(plan.Pending())
		if c := s.prior.Pods; c != nil && s.touched {
			// The pass that wrote the record evicted pods and never wrote
			// its status (it died, or its write was refused): the pods
			// left are not what the drain started with; the record's are.
			s.status.TotalPods, s.status.EvictionPods = c.Total, c.ToEvict
		}
		msg := fmt.Sprintf("Maintenance of node %s started: %d pods on the node, %d to evict", s.node.Name, s.status.TotalPods, s.status.EvictionPods)
		if staying := plan.SkippedSummary(); staying != "" {
			msg += "; staying: " + staying
		}
		r.Recorder.Eventf(s.nm, nil, corev1.EventTypeNormal, ReasonBeginMaintenance, "BeginMaintenance", "%s", msg)
	}
	return ctrl.Result{}, nil
}

// readPlan reads the node's pods and classifies them by rules. Until the
// node's pod informer has synced it waits up to podsSyncWait, then ends the
// pass (a non-zero result) deciding nothing: an empty store before its first
// list would make the node look drained.
func (r *NodeMaintenanceReconciler) readPlan(ctx context.Context, s *scope, rules drain.Rules) ([]corev1.Pod, drain.Plan, ctrl.Result, error) {
	wait, cancel := context.WithTimeout(ctx, podsSyncWait)
	pods, ok := r.Pods.Pods(wait, s.node.Name)
	cancel()
	if !ok {
		log.FromContext(ctx).Info("the pods of the node are not listed yet; the drain waits for them", "node", s.node.Name)
		return nil, drain.Plan{}, ctrl.Result{RequeueAfter: podsSyncRetry}, nil
	}
	plan, err := drain.NewPlan(pods, rules)
	if err != nil {
		return nil, drain.Plan{}, ctrl.Result{}, fmt.Errorf("NodeMaintenance %s: %w", s.nm.Name, err)
	}
	return pods, plan, ctrl.Result{}, nil
}

// countPods counts the node's pods for the prior-state record, as planDrain
// will count them into the status, with the cordon the record is about to
// date. The pod informer was started by holdPods and has mostly synced while
// the pass took the lease, so this rarely waits.
func (r *NodeMaintenanceReconciler) countPods(ctx context.Context, s *scope, cordonedAt time.Time) (*nodestate.PodCounts, ctrl.Result, error) {
	rules := r.rules(s)
	rules.CordonedAt = cordonedAt
	pods, plan, res, err := r.readPlan(ctx, s, rules)
	if err != nil || !res.IsZero() {
		return nil, res, err
	}
	return &nodestate.PodCounts{Total: len(pods), ToEvict: len(plan.Pending())}, ctrl.Result{}, nil
}

// evictRound makes one round of evictions (s.round) and counts it in the
// metrics.
func (r *NodeMaintenanceReconciler) evictRound(ctx context.Context, s *scope) (ctrl.Result, error) {
	s.round = r.evict(ctx, s, s.plan)
	recordRound(s.round)
	return ctrl.Result{}, nil
}

// evict makes one round of eviction calls for the pods plan lets go now
// (Evictable) that this process has not evicted moments ago. A refusal by a PodDisruptionBudget is an
// event, explained first by any budget an interrupted eviction holds.
func (r *NodeMaintenanceReconciler) evict(ctx context.Context, s *scope, plan drain.Plan) drain.Round {
	p := s.progress
	results := drain.Evict(ctx, r.Evictor, p.notEvictedYet(plan.Evictable(), r.now()), r.Options.EvictionParallelism, r.rules(s).Grace())
	for _, res := range results {
		if res.Outcome == drain.Evicted {
			p.evicted[res.UID] = r.now()
		}
	}
	round := drain.NewRound(plan, results)
	if round.Count(drain.Blocked) > 0 {
		round.Interrupted = r.interruptedEvictions(ctx, round.BlockedNamespaces())
		r.Recorder.Eventf(s.nm, nil, corev1.EventTypeWarning, ReasonEvictionBlocked, "Evict", "%s", round.Problems()[0])
	}
	return round
}

// interruptedEvictions reads the budgets of the namespaces from the cache
// and lists those charged for a pod that never left
// (drain.InterruptedEvictions). It is only an explanation: a read that fails
// leaves it out.
func (r *NodeMaintenanceReconciler) interruptedEvictions(ctx context.Context, namespaces []string) []drain.InterruptedEviction {
	// A budget's pod may run on any node, so it is read live, listed by name
	// (the operator may list pods, not get them); only after a refusal, and
	// only for budget entries old enough to have been interrupted.
	running := func(key types.NamespacedName) bool {
		pods := &corev1.PodList{}
		err := r.APIReader.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingFields{"metadata.name": key.Name})
		return err == nil && len(pods.Items) == 1 && pods.Items[0].DeletionTimestamp == nil
	}
	var out []drain.InterruptedEviction
	for _, ns := range namespaces {
		pdbs := &policyv1.PodDisruptionBudgetList{}
		if err := r.Client.List(ctx, pdbs, client.InNamespace(ns)); err != nil {
			log.FromContext(ctx).V(1).Info("cannot read the PodDisruptionBudgets of a blocked pod", "namespace", ns, "error", err.Error())
			continue
		}
		out = append(out, drain.InterruptedEvictions(pdbs.Items, running, r.now())...)
	}
	return out
}

// setDrainStatus writes what the round left into the status, at the end
// of the pass. Pods counted out, nothing else: written at most every
// statusInterval, so that a fast drain is not slowed by writes of its own
// progress.
func (r *NodeMaintenanceReconciler) setDrainStatus(_ context.Context, s *scope) (ctrl.Result, error) {
	setRound(s.status, s.round)
	setDrainConditions(s, s.round, r.now())
	s.writeProgressAtEnd(statusInterval)
	return ctrl.Result{}, nil
}

// afterRound says when to look again. A drained node's lease is renewed;
// otherwise pod deletions and PDB changes wake us through watches and the
// requeue is the safety net, with a backoff so that a PDB that never allows
// does not spin. What it says and remembers waits for the status write: a
// pass that loses its write to a conflict decides again.
func (r *NodeMaintenanceReconciler) afterRound(ctx context.Context, s *scope) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	round := s.round
	if round.Done() {
		s.onWritten(func() {
			drainDuration.Observe(r.now().Sub(s.nm.CreationTimestamp.Time).Seconds())
			r.Recorder.Eventf(s.nm, nil, corev1.EventTypeNormal, ReasonSucceededMaintenance, "Drain",
				"Node %s is cordoned and drained", s.node.Name)
			logger.Info("maintenance succeeded", "node", s.node.Name)
		})
		return ctrl.Result{RequeueAfter: r.Leases.RenewInterval()}, nil
	}
	next := r.Leases.RenewInterval()
	if deadline := drainDeadline(s); !deadline.IsZero() {
		// Be there when spec.drain.timeout expires.
		next = min(next, max(deadline.Sub(r.now()), time.Millisecond))
	}
	var backoff time.Duration // none after a round that nothing refused
	if round.Refused() {
		backoff = s.progress.nextBlockedBackoff(r.Options)
		next = min(next, backoff)
	} else {
		next = min(next, evictedRecently)
	}
	s.onWritten(func() {
		s.progress.blockedBackoff = backoff
		r.notifyBlockers(s)
		if debug := logger.V(1); debug.Enabled() {
			debug.Info("drain pass", "node", s.node.Name, "pending", len(round.Pending), "blocked", round.Count(drain.Blocked),
				"failed", round.Count(drain.Failed), "staying", round.Plan.SkippedSummary(), "requeueAfter", next)
		}
	})
	return ctrl.Result{RequeueAfter: next}, nil
}
