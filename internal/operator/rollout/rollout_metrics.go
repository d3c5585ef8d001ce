package rollout

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

// rolloutPhases and nodeStates are every value of status.phase and of a row's
// state, in the order of the API's enums: the gauges report each of them
// (0 or the count), so a series does not vanish when a rollout moves on.
var (
	rolloutPhases = []nmv1alpha1.RolloutPhase{
		nmv1alpha1.RolloutPending, nmv1alpha1.RolloutProgressing, nmv1alpha1.RolloutPaused,
		nmv1alpha1.RolloutHalted, nmv1alpha1.RolloutSucceeded,
	}
	nodeStates = []nmv1alpha1.RolloutNodeState{
		nmv1alpha1.NodeWaiting, nmv1alpha1.NodeDraining, nmv1alpha1.NodeStepRunning, nmv1alpha1.NodeHolding,
		nmv1alpha1.NodeRestoring, nmv1alpha1.NodeRecovering, nmv1alpha1.NodeSoaking, nmv1alpha1.NodeDone,
		nmv1alpha1.NodeFailed,
	}
)

// statusCollector reports each rollout's phase and the states of its nodes,
// read from the cache at scrape time: the series follow the objects, and
// those of a deleted rollout are gone at the next scrape. Rollouts are few,
// so a series per rollout (label name) is cheap, and lets an alert name it.
type statusCollector struct {
	reader atomic.Pointer[client.Reader]
	phase  *prometheus.Desc
	nodes  *prometheus.Desc
}

func newStatusCollector() *statusCollector {
	return &statusCollector{
		phase: prometheus.NewDesc("nodemaintenance_rollout_phase",
			"1 for the phase each NodeMaintenanceRollout is in (Pending before its first status), 0 for the others.",
			[]string{"name", "phase"}, nil),
		nodes: prometheus.NewDesc("nodemaintenance_rollout_nodes",
			"Nodes of each NodeMaintenanceRollout by state (status.nodes).", []string{"name", "state"}, nil),
	}
}

func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.phase
	ch <- c.nodes
}

func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	reader := c.reader.Load()
	if reader == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list := &nmv1alpha1.NodeMaintenanceRolloutList{}
	if err := (*reader).List(ctx, list); err != nil {
		ch <- prometheus.NewInvalidMetric(c.phase, err)
		return
	}
	for i := range list.Items {
		ro := &list.Items[i]
		current := ro.Status.Phase
		if current == "" {
			current = nmv1alpha1.RolloutPending
		}
		for _, p := range rolloutPhases {
			v := 0.0
			if p == current {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.phase, prometheus.GaugeValue, v, ro.Name, string(p))
		}
		counts := map[nmv1alpha1.RolloutNodeState]float64{}
		for _, row := range ro.Status.Nodes {
			counts[row.State]++
		}
		for _, st := range nodeStates {
			ch <- prometheus.MustNewConstMetric(c.nodes, prometheus.GaugeValue, counts[st], ro.Name, string(st))
		}
	}
}

var statuses = newStatusCollector()

// Registered from the start, as the other metrics of the operator are; the
// gauges report nothing until registerMetrics gives them a cache.
func init() {
	metrics.Registry.MustRegister(statuses)
}

// registerMetrics points the rollout gauges at the newest manager's cache
// (tests start several managers in one process).
func registerMetrics(reader client.Reader) {
	statuses.reader.Store(&reader)
}
