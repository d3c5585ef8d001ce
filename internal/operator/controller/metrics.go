package controller

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
)

var (
	drainDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "nodemaintenance_drain_duration_seconds",
		Help:    "Time from the creation of a NodeMaintenance until its node was drained (phase Succeeded), time queued under --max-unavailable included.",
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 14),
	})
	evictions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodemaintenance_evictions_total",
		Help: "Eviction calls by result: evicted, gone, blocked (a PodDisruptionBudget refused) or failed.",
	}, []string{"result"})
	evictionFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodemaintenance_eviction_failures_total",
		Help: "Evictions that did not succeed, by reason: DisruptionBudget (429) or the API error reason.",
	}, []string{"reason"})
)

// phaseCollector reports the number of NodeMaintenances by phase, and a few
// gauges of each Running one, read from the cache at scrape time: they can
// never drift from the objects, and a deleted or finished maintenance's
// series are gone at the next scrape. Per-object series exist only for the
// Running ones (at most one per node, and few at once), labelled by name and
// node, so an alert can say which maintenance to look at.
type phaseCollector struct {
	reader atomic.Pointer[client.Reader]
	desc   *prometheus.Desc
	// queued counts the Running ones that wait for a slot (Queued True).
	queued *prometheus.Desc
	// Of each Running maintenance: since when (its creation), the pods
	// still to leave, the drain progress, and whether a budget blocks it.
	runningSince, pendingPods, drainProgress, blockedByPDB *prometheus.Desc
}

func newPhaseCollector() *phaseCollector {
	return &phaseCollector{
		desc: prometheus.NewDesc(
			"nodemaintenance_maintenances", "NodeMaintenances by phase (an empty phase: not reconciled yet).", []string{"phase"}, nil),
		queued: prometheus.NewDesc(
			"nodemaintenance_queued_maintenances", "NodeMaintenances waiting for a slot under --max-unavailable (condition Queued True), their nodes untouched.", nil, nil),
		runningSince: prometheus.NewDesc(
			"nodemaintenance_maintenance_running_since_timestamp_seconds", "Creation time (Unix seconds) of each NodeMaintenance still Running (queued ones included).", objectLabels, nil),
		pendingPods: prometheus.NewDesc(
			"nodemaintenance_maintenance_pending_pods", "Pods of each Running NodeMaintenance not evicted yet (status.pendingPodsRefs).", objectLabels, nil),
		drainProgress: prometheus.NewDesc(
			"nodemaintenance_maintenance_drain_progress_ratio", "Share (0 to 1) of the pods that had to be evicted that are gone, of each Running NodeMaintenance (status.drainProgress).", objectLabels, nil),
		blockedByPDB: prometheus.NewDesc(
			"nodemaintenance_maintenance_blocked_by_pdb", "1 while the last drain round of a Running NodeMaintenance had an eviction refused (condition Drained False, reason BlockedByPDB), else 0.", objectLabels, nil),
	}
}

// objectLabels name a maintenance and its node on the per-object gauges.
var objectLabels = []string{"name", "node"}

func (c *phaseCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.desc, c.queued, c.runningSince, c.pendingPods, c.drainProgress, c.blockedByPDB} {
		ch <- d
	}
}

func (c *phaseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	reader := c.reader.Load()
	if reader == nil {
		return
	}
	list := &nmv1beta1.NodeMaintenanceList{}
	if err := (*reader).List(ctx, list); err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	counts := map[string]float64{
		string(nmv1beta1.MaintenanceRunning): 0, string(nmv1beta1.MaintenanceSucceeded): 0, string(nmv1beta1.MaintenanceFailed): 0,
	}
	waiting := 0.0
	for i := range list.Items {
		counts[string(list.Items[i].Status.Phase)]++
		if queued(&list.Items[i]) {
			waiting++
		}
		c.collectRunning(ch, &list.Items[i])
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, n, phase)
	}
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, waiting)
}

// collectRunning sends the per-object gauges of nm when it is Running (or
// not reconciled yet, an empty phase, which the controller makes Running).
func (c *phaseCollector) collectRunning(ch chan<- prometheus.Metric, nm *nmv1beta1.NodeMaintenance) {
	if nm.Status.Phase != nmv1beta1.MaintenanceRunning && nm.Status.Phase != "" {
		return
	}
	labels := []string{nm.Name, nm.Spec.NodeName}
	blocked := 0.0
	if cond := meta.FindStatusCondition(nm.Status.Conditions, nmv1beta1.ConditionDrained); cond != nil &&
		cond.Status == metav1.ConditionFalse && cond.Reason == nmv1beta1.ReasonBlockedByPDB {
		blocked = 1
	}
	ch <- prometheus.MustNewConstMetric(c.runningSince, prometheus.GaugeValue, float64(nm.CreationTimestamp.Unix()), labels...)
	ch <- prometheus.MustNewConstMetric(c.pendingPods, prometheus.GaugeValue, float64(len(nm.Status.PendingPodsRefs)), labels...)
	ch <- prometheus.MustNewConstMetric(c.drainProgress, prometheus.GaugeValue, float64(nm.Status.DrainProgress)/100, labels...)
	ch <- prometheus.MustNewConstMetric(c.blockedByPDB, prometheus.GaugeValue, blocked, labels...)
}

var phases = newPhaseCollector()

// The operator's metrics are in the manager's registry from the start, as
// controller-runtime's own are, so that everything the operator exports can
// be described before a manager runs (deploy/monitoring's tests do).
func init() {
	metrics.Registry.MustRegister(drainDuration, evictions, evictionFailures, phases)
}

// registerMetrics points the phase gauges at the newest manager's cache
// (tests start several managers in one process); before, they report none.
func registerMetrics(reader client.Reader) {
	phases.reader.Store(&reader)
}

// recordRound counts a drain round's eviction calls by result, and its
// refusals by reason.
func recordRound(round drain.Round) {
	for _, res := range round.Results {
		evictions.WithLabelValues(string(res.Outcome)).Inc()
	}
	for reason, n := range round.FailureReasons() {
		evictionFailures.WithLabelValues(reason).Add(float64(n))
	}
}
