package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
)

// The queue of --max-unavailable (with --max-unavailable-policy=Queue).
//
// A NodeMaintenance holds a slot from the moment it is granted one until its
// node is given back: it is granted (Queued False, SlotAcquired, written to
// its status before its lease is taken or its node touched), or its node
// carries the maintenance (the prior-state record exists: cordoned, draining,
// drained, left cordoned by a Failed drain, or being restored). It gives the
// slot back when it is gone, or Failed with its node restored (the record is
// removed by the restore) or never touched.
//
// The rule, first come first served: sort the live NodeMaintenances by
// (creationTimestamp, name). One that holds no slot starts iff
//
//	(slots held) + (NodeMaintenances waiting ahead of it) < limit
//
// A slot once granted is never taken back, even if the limit shrinks (a
// percentage of fewer nodes, or the operator restarted with a lower limit):
// the node may already be cordoned.
//
// Why two passes cannot take the same last slot. The decision reads the
// informer cache, which can be behind in two ways:
//   - A NodeMaintenance created later may not be in the cache yet. Harmless:
//     it is behind the deciding one in creation order, or (same second of
//     creationTimestamp, earlier name) it decides later against a cache that
//     shows this one.
//   - A grant may not be in the cache yet: the status write of a pass that
//     granted a slot moments ago. The deciding pass would see that
//     NodeMaintenance as still waiting; if it sorts after the deciding one
//     (it was created in the same second with a later name, or the limit grew
//     in between) it would not be counted at all, and two passes could fill
//     one slot. So the grants this process made are also kept in memory
//     (granted), and every decision is taken under one lock (queueMu): a
//     pass always sees every grant made before it, cached or not.
//
// Grants made by an earlier process (a restart, or another leader) are in
// the initial list of this process's cache, which is consistent, because a
// grant is written before the lease is taken: what this process cannot see
// is only a grant whose write the old leader made after losing leadership,
// the split brain that leader election already accepts for every write.

// queueBackstop re-checks a queued maintenance even without an event: a
// percentage limit grows with nodes added to the cluster, which no
// NodeMaintenance event reports.
const queueBackstop = time.Minute

// queueStatusInterval is how often at most a queued maintenance rewrites
// whom it waits behind while the queue moves (its start is written at once).
const queueStatusInterval = 5 * time.Second

// ReasonQueued is the event of a maintenance that waits for a slot.
const ReasonQueued = "Queued"

// maxNamesInQueueMessage bounds the names the Queued condition lists.
const maxNamesInQueueMessage = 10

// waitForSlot lets a maintenance that has not touched its node go on only
// when it holds a slot under Options.MaxUnavailable; otherwise it records
// that it is queued and ends the pass (enqueue). Without a limit every
// maintenance goes on (and one queued by an earlier configuration is told it
// may start).
func (r *NodeMaintenanceReconciler) waitForSlot(ctx context.Context, s *scope) (ctrl.Result, error) {
	if _, touched, _ := priorState(s.nm); touched {
		return ctrl.Result{}, nil
	}
	limit := r.Options.MaxUnavailable
	if limit == nil {
		if meta.IsStatusConditionTrue(s.status.Conditions, nmv1beta1.ConditionQueued) {
			setCondition(s, nmv1beta1.ConditionQueued, false, nmv1beta1.ReasonSlotAcquired, "the operator runs without --max-unavailable: no queue", r.now())
		}
		return ctrl.Result{}, nil
	}

	r.queueMu.Lock()
	defer r.queueMu.Unlock()
	if grantedInStatus(s.nm) {
		return ctrl.Result{}, nil
	}
	if r.granted[s.nm.UID] {
		// Granted by an earlier pass whose status write failed: record it
		// before the lease is taken.
		return r.recordGrant(ctx, s, "a slot was granted under --max-unavailable="+limit.String())
	}
	list := &nmv1beta1.NodeMaintenanceList{}
	if err := r.Client.List(ctx, list); err != nil {
		return ctrl.Result{}, fmt.Errorf("list NodeMaintenances to apply --max-unavailable=%s: %w", limit, err)
	}
	nodes := &corev1.NodeList{}
	// Only counted: no copy of every cached node.
	if err := r.Client.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("count the nodes to apply --max-unavailable=%s: %w", limit, err)
	}
	n, err := validation.MaxUnavailableNodes(limit, len(nodes.Items))
	if err != nil {
		return ctrl.Result{}, err
	}
	r.pruneGrants(list.Items)
	pos := queuePosition(s.nm, list.Items, r.granted)
	rule := fmt.Sprintf("--max-unavailable=%s lets %d of %d nodes be in maintenance at once", limit, n, len(nodes.Items))
	if pos.mayStart(n) {
		if r.granted == nil {
			r.granted = map[types.UID]bool{}
		}
		// In memory first: a pass that decides before this grant reaches
		// the cache must count it (see the comment at the top).
		r.granted[s.nm.UID] = true
		return r.recordGrant(ctx, s, fmt.Sprintf("a slot is free: %s, and %d other maintenances hold one", rule, len(pos.holding)))
	}

	return r.enqueue(s, fmt.Sprintf("queued behind %s: %s; this maintenance starts, first come first served, when one of them ends "+
		"(is deleted, or fails and gives its node back). Its node is not cordoned until then", nameList(pos.blocking()), rule))
}

// enqueue records that the maintenance waits for a slot (msg) and ends the
// pass. The status is written at the end of the pass, after queueMu is let
// go: the decisions read grants and records, not whether one waits.
func (r *NodeMaintenanceReconciler) enqueue(s *scope, msg string) (ctrl.Result, error) {
	wasQueued := meta.IsStatusConditionTrue(s.status.Conditions, nmv1beta1.ConditionQueued)
	if s.status.Phase == "" {
		s.status.Phase = nmv1beta1.MaintenanceRunning
	}
	setCondition(s, nmv1beta1.ConditionQueued, true, nmv1beta1.ReasonWaitingForSlot, msg, r.now())
	// The queue moved, this one still waits: the names it waits behind are
	// rewritten at most every queueStatusInterval. Every queued maintenance
	// decides again at each slot change, and rewriting all of them each time
	// is writes in the square of the queue's length, on the API server the
	// drains need.
	s.writeProgressAtEnd(queueStatusInterval)
	if !wasQueued {
		// Its Queued condition changes: written at once, never held back.
		s.onWritten(func() {
			r.Recorder.Eventf(s.nm, nil, corev1.EventTypeNormal, ReasonQueued, "Queue", "Maintenance of node %s %s", s.nm.Spec.NodeName, msg)
		})
	}
	return ctrl.Result{RequeueAfter: queueBackstop}, nil
}

// recordGrant writes Queued False (SlotAcquired) to the status and lets the
// pass go on. It is written at once (mid-pass), before the lease is taken,
// so that a restarted operator counts the grant; a pass that cannot write it
// ends, and the next one writes it again (the grant is in memory).
func (r *NodeMaintenanceReconciler) recordGrant(ctx context.Context, s *scope, msg string) (ctrl.Result, error) {
	if s.status.Phase == "" {
		s.status.Phase = nmv1beta1.MaintenanceRunning
	}
	setCondition(s, nmv1beta1.ConditionQueued, false, nmv1beta1.ReasonSlotAcquired, msg, r.now())
	if err := r.writeStatus(ctx, s.nm, s.status); err != nil {
		return s.writeFailed(err)
	}
	return ctrl.Result{}, nil
}

// queue is where one maintenance stands: the maintenances holding a slot and
// those waiting ahead of it, each in creation order.
type queue struct {
	holding, ahead []*nmv1beta1.NodeMaintenance
}

func (q queue) mayStart(limit int) bool { return len(q.holding)+len(q.ahead) < limit }

// blocking are the maintenances it waits for, in creation order.
func (q queue) blocking() []*nmv1beta1.NodeMaintenance {
	out := append(append([]*nmv1beta1.NodeMaintenance{}, q.holding...), q.ahead...)
	sort.SliceStable(out, func(i, j int) bool { return createdBefore(out[i], out[j]) })
	return out
}

// queuePosition places nm among all (the live NodeMaintenances, nm among
// them or not), given the grants this process made.
func queuePosition(nm *nmv1beta1.NodeMaintenance, all []nmv1beta1.NodeMaintenance, granted map[types.UID]bool) queue {
	var q queue
	for i := range all {
		o := &all[i]
		switch {
		case o.UID == nm.UID:
		case holdsSlot(o, granted):
			q.holding = append(q.holding, o)
		case waiting(o) && createdBefore(o, nm):
			q.ahead = append(q.ahead, o)
		}
	}
	sort.SliceStable(q.holding, func(i, j int) bool { return createdBefore(q.holding[i], q.holding[j]) })
	sort.SliceStable(q.ahead, func(i, j int) bool { return createdBefore(q.ahead[i], q.ahead[j]) })
	return q
}

// holdsSlot: see the comment at the top of this file.
func holdsSlot(nm *nmv1beta1.NodeMaintenance, granted map[types.UID]bool) bool {
	if _, touched, _ := priorState(nm); touched {
		return true
	}
	if nm.Status.Phase == nmv1beta1.MaintenanceFailed {
		return false
	}
	return granted[nm.UID] || grantedInStatus(nm)
}

// waiting reports whether a maintenance that holds no slot still wants one:
// not Failed, not being deleted.
func waiting(nm *nmv1beta1.NodeMaintenance) bool {
	return nm.DeletionTimestamp.IsZero() && nm.Status.Phase != nmv1beta1.MaintenanceFailed
}

// grantedInStatus reports a grant recorded in the status: Queued False.
func grantedInStatus(nm *nmv1beta1.NodeMaintenance) bool {
	return meta.IsStatusConditionPresentAndEqual(nm.Status.Conditions, nmv1beta1.ConditionQueued, metav1.ConditionFalse)
}

// queued reports a maintenance that waits for a slot and has touched nothing.
func queued(nm *nmv1beta1.NodeMaintenance) bool {
	return meta.IsStatusConditionTrue(nm.Status.Conditions, nmv1beta1.ConditionQueued)
}

// createdBefore is the queue's order: creationTimestamp, then name.
func createdBefore(a, b *nmv1beta1.NodeMaintenance) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

func nameList(nms []*nmv1beta1.NodeMaintenance) string {
	names := make([]string, 0, min(len(nms), maxNamesInQueueMessage))
	for i, nm := range nms {
		if i == maxNamesInQueueMessage {
			break
		}
		names = append(names, nm.Name)
	}
	s := strings.Join(names, ", ")
	if len(nms) > maxNamesInQueueMessage {
		s += fmt.Sprintf(" and %d more", len(nms)-maxNamesInQueueMessage)
	}
	return s
}

// pruneGrants drops the grants of maintenances that are gone, or Failed
// without touching their node: the status (or the record) speaks for the
// others. Called with queueMu held.
func (r *NodeMaintenanceReconciler) pruneGrants(live []nmv1beta1.NodeMaintenance) {
	keep := make(map[types.UID]bool, len(live))
	for i := range live {
		if live[i].Status.Phase != nmv1beta1.MaintenanceFailed {
			keep[live[i].UID] = true
		}
	}
	for uid := range r.granted {
		if !keep[uid] {
			delete(r.granted, uid)
		}
	}
}

// queuedMaintenances are the maintenances waiting for a slot: a change of
// any NodeMaintenance that may free one (slotChanges) wakes them at once.
func (r *NodeMaintenanceReconciler) queuedMaintenances(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &nmv1beta1.NodeMaintenanceList{}
	// Without copies from the cache: only read, and with 500 maintenances
	// the copies were a fifth of the operator's CPU while new ones were admitted.
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if queued(&list.Items[i]) && list.Items[i].DeletionTimestamp.IsZero() {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
		}
	}
	return reqs
}

// slotChanges passes the NodeMaintenance events that may free a slot or
// move the queue: a deletion, and an update of the phase, the prior-state
// record, the deletion timestamp or the Queued condition.
var slotChanges = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	DeleteFunc: func(event.DeleteEvent) bool { return true },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*nmv1beta1.NodeMaintenance)
		n, ok2 := e.ObjectNew.(*nmv1beta1.NodeMaintenance)
		if !ok1 || !ok2 {
			return true
		}
		_, oldTouched, _ := priorState(o)
		_, newTouched, _ := priorState(n)
		return o.Status.Phase != n.Status.Phase || oldTouched != newTouched ||
			o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
			queued(o) != queued(n) || grantedInStatus(o) != grantedInStatus(n)
	},
	GenericFunc: func(event.GenericEvent) bool { return true },
}
