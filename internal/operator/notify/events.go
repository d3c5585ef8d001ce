package notify

import (
	"fmt"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// The CloudEvents types, one per transition (docs/guides/notifications.md
// documents each, and their data).
const (
	RolloutStarted      = "io.nodemaintenance.rollout.started"
	RolloutBlocked      = "io.nodemaintenance.rollout.blocked"
	RolloutNodeDone     = "io.nodemaintenance.rollout.node.done"
	RolloutNodeFailed   = "io.nodemaintenance.rollout.node.failed"
	RolloutNodeRestored = "io.nodemaintenance.rollout.node.restored"
	RolloutHalted       = "io.nodemaintenance.rollout.halted"
	RolloutSucceeded    = "io.nodemaintenance.rollout.succeeded"

	MaintenanceStarted   = "io.nodemaintenance.maintenance.started"
	MaintenanceBlocked   = "io.nodemaintenance.maintenance.blocked"
	MaintenanceFailed    = "io.nodemaintenance.maintenance.failed"
	MaintenanceSucceeded = "io.nodemaintenance.maintenance.succeeded"
	MaintenanceRestored  = "io.nodemaintenance.maintenance.restored"
)

// RolloutTypes is the CloudEvents type of each event a rollout's
// spec.notify[].events may name.
var RolloutTypes = map[nmv1alpha1.NotificationEvent]string{
	nmv1alpha1.EventStarted:    RolloutStarted,
	nmv1alpha1.EventBlocked:    RolloutBlocked,
	nmv1alpha1.EventNodeDone:   RolloutNodeDone,
	nmv1alpha1.EventNodeFailed: RolloutNodeFailed,
	nmv1alpha1.EventRestored:   RolloutNodeRestored,
	nmv1alpha1.EventHalted:     RolloutHalted,
	nmv1alpha1.EventSucceeded:  RolloutSucceeded,
}

// Event is one notification: the CloudEvents attributes and the data.
type Event struct {
	// Type is one of the types above.
	Type string
	// Source is the object's API path (RolloutSource, MaintenanceSource).
	Source string
	// Subject is the node, when the event is about one.
	Subject string
	// ID is unique per event and the same on every attempt (EventID).
	ID string
	// Time is when the transition was written.
	Time time.Time
	// Data is a RolloutData or a MaintenanceData, sent as JSON.
	Data any
}

// RolloutSource is the source of a rollout's events: its API path.
func RolloutSource(name string) string {
	return fmt.Sprintf("/apis/%s/nodemaintenancerollouts/%s", nmv1alpha1.GroupVersion, name)
}

// MaintenanceSource is the source of a NodeMaintenance's events: its API path.
func MaintenanceSource(name string) string {
	return fmt.Sprintf("/apis/%s/nodemaintenances/%s", nmv1beta1.GroupVersion, name)
}

// EventID is the id of an event: the object's UID, the resourceVersion of
// the write that decided the transition, the type's last words and what
// tells apart two events of one type in one write (the node). A write
// decides each transition once, so the id is unique, and a retry sends the
// same event with the same id.
func EventID(uid, resourceVersion, eventType string, distinct ...string) string {
	parts := []string{uid, resourceVersion, strings.TrimPrefix(eventType, "io.nodemaintenance.")}
	for _, d := range distinct {
		if d != "" {
			parts = append(parts, d)
		}
	}
	return strings.Join(parts, "/")
}

// RolloutData is the data of a rollout's events.
type RolloutData struct {
	// Rollout is the rollout's name.
	Rollout string `json:"rollout"`
	// Event is the transition, as spec.notify[].events names it.
	Event nmv1alpha1.NotificationEvent `json:"event"`
	// Node is the node of a node event.
	Node string `json:"node,omitempty"`
	// Phase and Message are the rollout's status.phase and status.message.
	Phase   nmv1alpha1.RolloutPhase `json:"phase"`
	Message string                  `json:"message,omitempty"`
	// Reason is the node's row reason (why it failed) for a node event.
	Reason string `json:"reason,omitempty"`
	// Blockers are status.blockers: what holds the next node.
	Blockers []string `json:"blockers,omitempty"`
	// Total, InProgress, Done and Failed are the status's counts.
	Total      int32 `json:"total"`
	InProgress int32 `json:"inProgress"`
	Done       int32 `json:"done"`
	Failed     int32 `json:"failed"`
}

// MaintenanceData is the data of a NodeMaintenance's events.
type MaintenanceData struct {
	// Maintenance is the NodeMaintenance's name, Node its spec.nodeName.
	Maintenance string `json:"maintenance"`
	Node        string `json:"node"`
	// Phase is its status.phase.
	Phase nmv1beta1.MaintenancePhase `json:"phase,omitempty"`
	// Reason is status.lastError for failed.
	Reason string `json:"reason,omitempty"`
	// Blockers say what the drain waits on, one line per cause (blocked).
	Blockers []string `json:"blockers,omitempty"`
	// TotalPods, EvictionPods, PendingPods and DrainProgress are the
	// status's counts.
	TotalPods     int `json:"totalPods"`
	EvictionPods  int `json:"evictionPods"`
	PendingPods   int `json:"pendingPods"`
	DrainProgress int `json:"drainProgress"`
}

// cloudEvent is e as a CloudEvents 1.0 event with JSON data.
func (e Event) cloudEvent() (cloudevents.Event, error) {
	ev := cloudevents.NewEvent()
	ev.SetID(e.ID)
	ev.SetType(e.Type)
	ev.SetSource(e.Source)
	if e.Subject != "" {
		ev.SetSubject(e.Subject)
	}
	ev.SetTime(e.Time)
	if err := ev.SetData(cloudevents.ApplicationJSON, e.Data); err != nil {
		return ev, fmt.Errorf("encode the data of %s event %s: %w", e.Type, e.ID, err)
	}
	return ev, ev.Validate()
}
