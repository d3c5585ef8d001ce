// This file is long on purpose: it is the whole NodeMaintenanceRollout API (spec, status and their documented
// fields), kept in one file as kubebuilder projects keep one kind, so that the CRD and its docs read from one place.

package v1alpha1

import (
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

const (
	// RolloutKind is the kind of the NodeMaintenanceRollout resource.
	RolloutKind = "NodeMaintenanceRollout"
	// RolloutResource is the plural resource name of NodeMaintenanceRollout.
	RolloutResource = "nodemaintenancerollouts"
	// RolloutCRDName is the name of the NodeMaintenanceRollout
	// CustomResourceDefinition.
	RolloutCRDName = RolloutResource + "." + Group

	// RolloutFinalizer keeps a rollout until every node it holds is restored.
	RolloutFinalizer = Group + "/rollout"

	// RolloutLabel is set on the NodeMaintenances and step Jobs of a rollout,
	// to the rollout's name: `kubectl get nm -l nodemaintenance.io/rollout=NAME`.
	RolloutLabel = Group + "/rollout"
	// RolloutNodeLabel is set on the step Jobs of a rollout, to the node the
	// Job runs on.
	RolloutNodeLabel = Group + "/node"
)

// ControllingRollout is the name of the NodeMaintenanceRollout that is
// obj's controller (a rollout's NodeMaintenances and step Jobs), or "" when
// no rollout is.
func ControllingRollout(obj metav1.Object) string {
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != RolloutKind || !strings.HasPrefix(ref.APIVersion, Group+"/") {
		return ""
	}
	return ref.Name
}

// RolloutFailureAction is what a rollout does when a node fails.
// +kubebuilder:validation:Enum=Halt;Continue
type RolloutFailureAction string

const (
	// RolloutHalt starts no further node after a failure; the nodes in
	// progress finish, and the failed node stays as its maintenance left it
	// (for a drain that timed out, as spec.drain.onTimeout says).
	RolloutHalt RolloutFailureAction = "Halt"
	// RolloutContinue restores the failed node and goes on with the next
	// ones, until more than maxFailures nodes failed; then it halts.
	RolloutContinue RolloutFailureAction = "Continue"
)

// NodeMaintenanceRolloutSpec says which nodes to maintain, how many at once,
// and what to do on each.
//
// +kubebuilder:validation:XValidation:rule="has(self.nodeSelector) != has(self.nodeNames)",message="set exactly one of nodeSelector and nodeNames"
type NodeMaintenanceRolloutSpec struct {
	// NodeSelector picks the nodes by label. The set is resolved when the
	// rollout starts and recorded in status.nodes, in name order; nodes that
	// join later are not added. Exactly one of nodeSelector and nodeNames.
	// It cannot be changed after creation.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// NodeNames lists the nodes, maintained in this order. Exactly one of
	// nodeSelector and nodeNames. It cannot be changed after creation.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	NodeNames []string `json:"nodeNames,omitempty"`

	// MaxUnavailable is how many nodes of the set may be out of service at
	// once (a count, or a percentage of the set rounded down, at least 1):
	// the nodes this rollout maintains, and the nodes of the set that are
	// unschedulable or NotReady for any other reason. Default 1. It can be
	// changed while the rollout runs. The operator's --max-unavailable and
	// the control-plane guard still apply to each node.
	// +optional
	// +kubebuilder:validation:XIntOrString
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// Reason is given to each node's NodeMaintenance (spec.reason).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`

	// Drain is the drain policy of each node's NodeMaintenance (spec.drain).
	// It cannot be changed after creation.
	// +optional
	Drain *nmv1beta1.DrainPolicy `json:"drain,omitempty"`

	// Step is a Job run on each node while it is drained. Without it, each
	// node is held for holdFor and restored. It cannot be changed after
	// creation.
	// +optional
	Step *RolloutStep `json:"step,omitempty"`

	// HoldFor is how long a drained node without a step stays in maintenance
	// before it is restored. Default 0.
	// +optional
	HoldFor *metav1.Duration `json:"holdFor,omitempty"`

	// SoakFor is how long a node must be restored and Ready before its slot
	// goes to the next node. Default 0.
	// +optional
	SoakFor *metav1.Duration `json:"soakFor,omitempty"`

	// OnFailure is what happens when a node fails (its drain failed, or its
	// step failed or timed out): Halt (default) or Continue.
	// +optional
	OnFailure RolloutFailureAction `json:"onFailure,omitempty"`

	// MaxFailures is how many failed nodes onFailure Continue tolerates; one
	// more halts the rollout. Default 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxFailures *int32 `json:"maxFailures,omitempty"`

	// Paused starts no new node; the nodes in progress finish. It can be
	// changed while the rollout runs.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// RecoveryGate is what a restored node waits for before its slot goes to
	// the next node: Workloads (default) waits until the node is Ready and
	// every Deployment, ReplicaSet and StatefulSet that had pods evicted from
	// it is back to full availability; NodeReady relaxes it to the node being
	// Ready. It can be changed while the rollout runs.
	// +optional
	RecoveryGate RecoveryGate `json:"recoveryGate,omitempty"`

	// RecoveryTimeout bounds the recovery wait of one node, from its
	// restore; past it the node fails and the rollout follows onFailure.
	// Default 10m. It can be changed while the rollout runs.
	// +optional
	RecoveryTimeout *metav1.Duration `json:"recoveryTimeout,omitempty"`

	// Gates hold the next node until they open: a node starts only while
	// every gate is open. The nodes in progress finish. They can be changed
	// while the rollout runs.
	// +optional
	Gates *RolloutGates `json:"gates,omitempty"`

	// Window is when nodes may start: a node starts only inside it; a node
	// in progress finishes. Without it, nodes start at any time. It can be
	// changed while the rollout runs.
	// +optional
	Window *MaintenanceWindow `json:"window,omitempty"`

	// Notify sends CloudEvents over HTTP for the rollout's transitions. A
	// notification that cannot be sent never blocks or fails the rollout.
	// It can be changed while the rollout runs.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	Notify []Notification `json:"notify,omitempty"`
}

// RecoveryGate is what a restored node waits for before its slot is given
// to the next node.
// +kubebuilder:validation:Enum=Workloads;NodeReady
type RecoveryGate string

const (
	// RecoveryWorkloads waits until the node is Ready and every workload
	// that had pods evicted from it is fully available again.
	RecoveryWorkloads RecoveryGate = "Workloads"
	// RecoveryNodeReady waits only until the node is Ready.
	RecoveryNodeReady RecoveryGate = "NodeReady"
)

// RolloutGates are checks outside the rollout that must pass before a node
// starts.
type RolloutGates struct {
	// Prometheus holds the next node while a query returns any series, as
	// an alert gate: e.g. ALERTS{alertstate="firing",severity="critical"}.
	// +optional
	Prometheus *PrometheusGate `json:"prometheus,omitempty"`
}

// PrometheusGate is a Prometheus instant query that must return no series
// for a node to start. While Prometheus cannot be reached, or answers with
// an error, the gate stays closed: the rollout never proceeds blind.
type PrometheusGate struct {
	// URL is the Prometheus server's base URL, http or https (e.g.
	// http://prometheus.monitoring:9090); the query goes to
	// <url>/api/v1/query.
	URL string `json:"url"`
	// Query is a PromQL expression; the gate is open while it returns no
	// series.
	Query string `json:"query"`
}

// MaintenanceWindow is a recurring window of time, on some days of the week,
// in a time zone.
type MaintenanceWindow struct {
	// Days are the days on which the window starts, as English day names,
	// full or three letters, any case (Monday, mon, SAT).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=7
	Days []string `json:"days"`
	// Start is when the window opens on each of its days, HH:MM (24 hours).
	Start string `json:"start"`
	// End is when it closes, HH:MM. An end at or before start closes the
	// window on the next day (22:00 to 04:00 crosses midnight); an end equal
	// to start makes a window of 24 hours.
	End string `json:"end"`
	// TimeZone is the IANA time zone of start and end (Europe/Berlin);
	// default UTC. Daylight saving changes are followed.
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
}

// NotificationEvent is a kind of transition a notification is sent for.
// +kubebuilder:validation:Enum=Started;Blocked;NodeDone;NodeFailed;Halted;Succeeded;Restored
type NotificationEvent string

// The events a rollout sends (see docs/guides/notifications.md for their
// CloudEvents types and fields).
const (
	// EventStarted: the rollout started its first node.
	EventStarted NotificationEvent = "Started"
	// EventBlocked: something holds the next node (a gate, the window, a
	// workload not recovered, someone else's NodeMaintenance); the event
	// names the blockers. Sent again when the blockers change.
	EventBlocked NotificationEvent = "Blocked"
	// EventNodeDone: a node was maintained, restored and recovered.
	EventNodeDone NotificationEvent = "NodeDone"
	// EventNodeFailed: a node failed; the event says why.
	EventNodeFailed NotificationEvent = "NodeFailed"
	// EventHalted: the rollout halted.
	EventHalted NotificationEvent = "Halted"
	// EventSucceeded: every node of the rollout is done.
	EventSucceeded NotificationEvent = "Succeeded"
	// EventRestored: a node's maintenance ended and the node was restored.
	EventRestored NotificationEvent = "Restored"
)

// Notification is an HTTP endpoint that receives CloudEvents (structured
// JSON, CloudEvents 1.0) for a rollout's transitions.
type Notification struct {
	// URL receives the events by HTTP POST; http or https.
	URL string `json:"url"`
	// Events are the transitions sent; empty sends every one.
	// +optional
	// +listType=set
	Events []NotificationEvent `json:"events,omitempty"`
	// SecretRef names a key of a Secret in the operator's namespace whose
	// value is sent as the bearer token (Authorization: Bearer <value>).
	// +optional
	SecretRef *SecretKeyRef `json:"secretRef,omitempty"`
}

// SecretKeyRef names one key of a Secret in the operator's namespace.
type SecretKeyRef struct {
	// Name of the Secret.
	Name string `json:"name"`
	// Key in the Secret's data.
	Key string `json:"key"`
}

// RolloutStep is the work done on each node while it is drained: a Job,
// pinned to the node and tolerating the maintenance taints.
type RolloutStep struct {
	// Namespace is where the step's Jobs are created. The creator of the
	// rollout must be allowed to create Jobs there.
	Namespace string `json:"namespace"`

	// JobTemplate is the Job run on each node. The operator sets its pod's
	// nodeName to the node, adds tolerations of the maintenance taints, and
	// sets restartPolicy Never when it is unset.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	JobTemplate batchv1.JobTemplateSpec `json:"jobTemplate"`

	// Timeout bounds the step on one node, from the Job's creation; a step
	// that takes longer fails the node. Without it the step may take as
	// long as it takes.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// RolloutPhase is the progress of a rollout.
// +kubebuilder:validation:Enum=Pending;Progressing;Paused;Halted;Succeeded
type RolloutPhase string

const (
	// RolloutPending: the node set is not resolved yet.
	RolloutPending RolloutPhase = "Pending"
	// RolloutProgressing: nodes are being maintained.
	RolloutProgressing RolloutPhase = "Progressing"
	// RolloutPaused: spec.paused is set; no new node starts.
	RolloutPaused RolloutPhase = "Paused"
	// RolloutHalted: a failure stopped the rollout; status.message and the
	// failed rows say why.
	RolloutHalted RolloutPhase = "Halted"
	// RolloutSucceeded: every node of the set is done (or failed within
	// maxFailures).
	RolloutSucceeded RolloutPhase = "Succeeded"
)

// RolloutNodeState is where one node of a rollout stands.
// +kubebuilder:validation:Enum=Waiting;Draining;StepRunning;Holding;Restoring;Recovering;Soaking;Done;Failed
type RolloutNodeState string

const (
	// NodeWaiting: not started, waiting for a slot (or for another
	// NodeMaintenance of the node to end: waitingFor names it).
	NodeWaiting RolloutNodeState = "Waiting"
	// NodeDraining: its NodeMaintenance is cordoning and draining it.
	NodeDraining RolloutNodeState = "Draining"
	// NodeStepRunning: drained; the step Job runs on it.
	NodeStepRunning RolloutNodeState = "StepRunning"
	// NodeHolding: drained, held for holdFor (no step). Without holdFor a
	// row goes straight on to Restoring, in the same status write.
	NodeHolding RolloutNodeState = "Holding"
	// NodeRestoring: its NodeMaintenance is deleted; the node is being
	// restored.
	NodeRestoring RolloutNodeState = "Restoring"
	// NodeRecovering: restored; waits until the workloads evicted from it
	// are fully available again (recoveryGate), at most recoveryTimeout.
	NodeRecovering RolloutNodeState = "Recovering"
	// NodeSoaking: restored; waits to be Ready for soakFor. A row whose
	// soakFor has passed (or that has none) when it recovers goes straight
	// on to Done, in the same status write.
	NodeSoaking RolloutNodeState = "Soaking"
	// NodeDone: maintained, restored, recovered and soaked.
	NodeDone RolloutNodeState = "Done"
	// NodeFailed: its drain or its step failed; reason says why.
	NodeFailed RolloutNodeState = "Failed"
)

// RolloutNode is one node's row in a rollout's status.
type RolloutNode struct {
	// Name is the node's name.
	Name string `json:"name"`
	// Wave is the node's wave: nodes are started in order, at most
	// maxUnavailable at a time, so wave N holds the nodes from position
	// (N-1)*maxUnavailable+1 (as maxUnavailable was when the set was
	// resolved).
	Wave int32 `json:"wave"`
	// State is where the node stands.
	State RolloutNodeState `json:"state"`
	// Maintenance is the name of the node's NodeMaintenance, once created.
	// +optional
	Maintenance string `json:"maintenance,omitempty"`
	// Job is the name of the node's step Job, once created.
	// +optional
	Job string `json:"job,omitempty"`
	// WaitingFor names the NodeMaintenance of someone else that holds the
	// node; the node is taken when it ends.
	// +optional
	WaitingFor string `json:"waitingFor,omitempty"`
	// Reason says why the node is in its state, for a failure what failed.
	// +optional
	Reason string `json:"reason,omitempty"`
	// StartedAt is when its NodeMaintenance was created.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// DrainedAt is when its NodeMaintenance succeeded.
	// +optional
	DrainedAt *metav1.Time `json:"drainedAt,omitempty"`
	// StepFinishedAt is when its step Job completed, or its hold ended.
	// +optional
	StepFinishedAt *metav1.Time `json:"stepFinishedAt,omitempty"`
	// RestoredAt is when its NodeMaintenance was gone and the node Ready.
	// +optional
	RestoredAt *metav1.Time `json:"restoredAt,omitempty"`
	// Workloads are the Deployments, ReplicaSets and StatefulSets whose pods
	// its drain was to evict (Kind namespace/name), recorded when the node
	// started: the recovery gate waits for them.
	// +optional
	Workloads []string `json:"workloads,omitempty"`
	// WaitingForWorkloads are the workloads of Workloads not yet fully
	// available again, each with its availability (Deployment a/web: 1 of 3
	// available).
	// +optional
	WaitingForWorkloads []string `json:"waitingForWorkloads,omitempty"`
	// RecoveredAt is when the node and its workloads had recovered.
	// +optional
	RecoveredAt *metav1.Time `json:"recoveredAt,omitempty"`
	// FinishedAt is when the node became Done or Failed.
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}

// Condition types of a rollout's status.conditions.
const (
	// RolloutConditionProgressing: nodes are being maintained, or will be.
	RolloutConditionProgressing = "Progressing"
	// RolloutConditionCompleted: every node is done.
	RolloutConditionCompleted = "Completed"
	// RolloutConditionHalted: a failure stopped the rollout.
	RolloutConditionHalted = "Halted"
	// RolloutConditionGated: a gate or the window holds the next node
	// (reasons OutsideWindow, AlertFiring, PrometheusUnreachable); False
	// when every gate is open.
	RolloutConditionGated = "Gated"
)

// NodeMaintenanceRolloutStatus is what the operator observed and did.
type NodeMaintenanceRolloutStatus struct {
	// ObservedGeneration is the generation of the spec the status is for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is Pending, Progressing, Paused, Halted or Succeeded.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`
	// Message says what the rollout does or why it halted, in a sentence.
	// +optional
	Message string `json:"message,omitempty"`
	// Nodes is the node set, resolved once, a row per node in the order they
	// are started. Once the rows take more than 1 MiB of JSON (thousands of
	// nodes), the rows of nodes already Done keep only name, wave, state,
	// startedAt and finishedAt, first finished first, so that the status
	// stays within what etcd keeps of one object (1.5 MiB); a set too large
	// even then is refused at creation.
	// +optional
	// +listType=map
	// +listMapKey=name
	Nodes []RolloutNode `json:"nodes,omitempty"`
	// Total is the number of nodes in the set.
	// +optional
	Total int32 `json:"total,omitempty"`
	// InProgress is the number of nodes between Draining and Soaking.
	// +optional
	InProgress int32 `json:"inProgress,omitempty"`
	// Done is the number of nodes Done.
	// +optional
	Done int32 `json:"done,omitempty"`
	// Failed is the number of nodes Failed.
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// StartedAt is when the node set was resolved.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// CompletedAt is when the rollout succeeded.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// NextWindowStart is when spec.window next opens, while it is closed.
	// +optional
	NextWindowStart *metav1.Time `json:"nextWindowStart,omitempty"`
	// Blockers say what holds the next node, one sentence each (a closed
	// gate, the window, workloads not recovered, someone else's
	// NodeMaintenance); empty when nothing does.
	// +optional
	Blockers []string `json:"blockers,omitempty"`
	// Conditions are Progressing, Completed, Halted and Gated.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodeMaintenanceRollout maintains every node a selector picks, a few at a
// time: each through a NodeMaintenance it owns, with a step Job run on each
// drained node, a soak after each restore, and a halt on failure.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=nmr
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase",description="Pending, Progressing, Paused, Halted or Succeeded"
// +kubebuilder:printcolumn:name="Done",type="integer",JSONPath=".status.done",description="Nodes done"
// +kubebuilder:printcolumn:name="Total",type="integer",JSONPath=".status.total",description="Nodes in the set"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="InProgress",type="integer",JSONPath=".status.inProgress",priority=1,description="Nodes between Draining and Soaking"
// +kubebuilder:printcolumn:name="Failed",type="integer",JSONPath=".status.failed",priority=1,description="Nodes failed"
// +kubebuilder:printcolumn:name="MaxUnavailable",type="string",JSONPath=".spec.maxUnavailable",priority=1,description="Nodes out of service at most"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.message",priority=1,description="What the rollout does, or why it halted"
type NodeMaintenanceRollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NodeMaintenanceRolloutSpec   `json:"spec,omitempty"`
	Status NodeMaintenanceRolloutStatus `json:"status,omitempty"`
}

// NodeMaintenanceRolloutList is a list of NodeMaintenanceRollout.
//
// +kubebuilder:object:root=true
type NodeMaintenanceRolloutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeMaintenanceRollout `json:"items"`
}
