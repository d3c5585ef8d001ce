package notify

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	sent = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodemaintenance_notifications_sent_total",
		Help: "Notifications (CloudEvents) delivered, by event type.",
	}, []string{"event"})
	failed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nodemaintenance_notifications_failed_total",
		Help: "Notifications dropped, by event type: out of attempts, refused by the receiver (a 4xx), their queue full, or still queued when the operator stopped.",
	}, []string{"event"})
)

func init() {
	metrics.Registry.MustRegister(sent, failed)
}
