package controller

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

// phaseCollector reports the number of NodeMaintenances by phase, read from
// the cache at scrape time so the gauge can never drift from the objects.
type phaseCollector struct {
	reader atomic.Pointer[client.Reader]
	desc   *prometheus.Desc
	// queued counts the Running ones that wait for a slot (Queued True).
	queued *prometheus.Desc
}

func newPhaseCollector() *phaseCollector {
	return &phaseCollector{
		desc: prometheus.NewDesc(
			"nodemaintenance_maintenances", "NodeMaintenances by phase (an empty phase: not reconciled yet).", []string{"phase"}, nil),
		queued: prometheus.NewDesc(
			"nodemaintenance_queued_maintenances", "NodeMaintenances waiting for a slot under --max-unavailable (condition Queued True), their nodes untouched.", nil, nil),
	}
}

func (c *phaseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.desc
	ch <- c.queued
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
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, n, phase)
	}
	ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, waiting)
}

var (
	registerOnce sync.Once
	phases       = newPhaseCollector()
)

// registerMetrics adds the operator's metrics to the manager's registry once
// per process; the phase gauge reads from the newest manager's cache (tests
// start several managers in one process).
func registerMetrics(reader client.Reader) {
	registerOnce.Do(func() {
		metrics.Registry.MustRegister(drainDuration, evictions, evictionFailures, phases)
	})
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
