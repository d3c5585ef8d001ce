package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// NodeMaintenanceFinalizer keeps a NodeMaintenance until the operator has
	// restored its node.
	NodeMaintenanceFinalizer = "foregroundDeleteNodeMaintenance"

	// Kind is the kind of the NodeMaintenance resource.
	Kind = "NodeMaintenance"
	// Resource is the plural resource name of NodeMaintenance.
	Resource = "nodemaintenances"
	// CRDName is the name of the NodeMaintenance CustomResourceDefinition.
	CRDName = Resource + "." + Group

	// MaxLeaseErrors is how many consecutive failures to hold the node lease
	// after the drain started a maintenance tolerates (errorOnLeaseCount); one
	// more restores the node and fails the maintenance. Flags, docs and the
	// provider's descriptions quote it from here.
	MaxLeaseErrors = 3

	// MaxReasonLength bounds spec.reason (in characters), so that a reason always
	// fits comfortably in events, logs and `kubectl get -o wide`.
	MaxReasonLength = 1024
)

// MaintenancePhase is the progress of a maintenance.
// +kubebuilder:validation:Enum=Running;Succeeded;Failed
type MaintenancePhase string

const (
	// MaintenanceRunning means the node is being cordoned and drained.
	MaintenanceRunning MaintenancePhase = "Running"
	// MaintenanceSucceeded means the node is cordoned and every pod that had to
	// be evicted is gone.
	MaintenanceSucceeded MaintenancePhase = "Succeeded"
	// MaintenanceFailed means the maintenance cannot go on, for example because
	// the node does not exist or its lease could not be held.
	MaintenanceFailed MaintenancePhase = "Failed"
)

// NodeMaintenanceSpec is what the user asks for.
type NodeMaintenanceSpec struct {
	// NodeName is the name of the node to put into maintenance. It cannot be
	// changed after creation: delete the NodeMaintenance and create another.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	NodeName string `json:"nodeName"`

	// Reason is free text that says why the node is in maintenance.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`

	// Drain is how the node is drained. Without it, every pod that
	// `kubectl drain --ignore-daemonsets --delete-emptydir-data --force`
	// would evict is evicted, and the drain waits as long as it takes. It
	// cannot be changed after creation.
	// +optional
	Drain *DrainPolicy `json:"drain,omitempty"`
}

// DrainTimeoutAction is what happens when a drain's timeout expires.
// +kubebuilder:validation:Enum=Fail;Restore;Force
type DrainTimeoutAction string

const (
	// DrainTimeoutFail: phase Failed, the node left cordoned and tainted as it
	// is; deleting the NodeMaintenance restores it.
	DrainTimeoutFail DrainTimeoutAction = "Fail"
	// DrainTimeoutRestore: phase Failed, and the node restored at once to its
	// state from before the maintenance.
	DrainTimeoutRestore DrainTimeoutAction = "Restore"
	// DrainTimeoutForce: the remaining pods are deleted, bypassing their
	// PodDisruptionBudgets (kubectl drain --disable-eviction). The operator
	// must be installed with the right to delete pods (--allow-force-drain).
	DrainTimeoutForce DrainTimeoutAction = "Force"
)

// DrainPolicy bounds and filters a drain. Every field is optional.
type DrainPolicy struct {
	// Timeout is how long the operator tries to drain the node, from the
	// cordon; OnTimeout says what happens then. Without it the drain waits as
	// long as it takes.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// OnTimeout is what happens when Timeout expires: Fail (the default),
	// Restore or Force. It needs Timeout.
	// +optional
	OnTimeout DrainTimeoutAction `json:"onTimeout,omitempty"`

	// PodSelector limits the drain to the pods it matches, like
	// `kubectl drain --pod-selector`: the others stay on the node.
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`

	// GracePeriodSeconds overrides the pods' own termination grace period,
	// like `kubectl drain --grace-period`. Without it each pod gets its own.
	// +optional
	// +kubebuilder:validation:Minimum=0
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`

	// SkipWaitForDeleteTimeout: a pod whose deletion began longer ago than
	// this counts as gone when the node is NotReady or unreachable, like
	// `kubectl drain --skip-wait-for-delete-timeout`, so that the maintenance
	// of a dead node can finish.
	// +optional
	SkipWaitForDeleteTimeout *metav1.Duration `json:"skipWaitForDeleteTimeout,omitempty"`

	// DeleteEmptyDirData lets the drain evict pods with emptyDir volumes,
	// whose data is lost with them; it is true when left out, as
	// `kubectl drain --delete-emptydir-data`. False keeps such pods on the
	// node, as `kubectl drain` without the flag: the drain then waits for
	// them and says why, until they are deleted by other means.
	// +optional
	DeleteEmptyDirData *bool `json:"deleteEmptyDirData,omitempty"`

	// AllowControlPlaneNode admits the maintenance of a control-plane node
	// (labelled node-role.kubernetes.io/control-plane), which is refused
	// without it: draining one takes a member of the control plane away.
	// +optional
	AllowControlPlaneNode bool `json:"allowControlPlaneNode,omitempty"`

	// AllowLastSchedulableNode admits the maintenance of the last node of the
	// cluster that pods can be scheduled on, which is refused without it:
	// the evicted pods would have nowhere to go.
	// +optional
	AllowLastSchedulableNode bool `json:"allowLastSchedulableNode,omitempty"`
}

// DrainLabel is the pod label of Cluster API's drain rules, honoured here
// with the same values: DrainLabelSkip pods stay on the node, and
// DrainLabelWaitCompleted pods are not evicted but waited for until they
// complete.
const (
	DrainLabel              = "cluster.x-k8s.io/drain"
	DrainLabelSkip          = "skip"
	DrainLabelWaitCompleted = "wait-completed"
)

// Condition types of status.conditions, kept consistent with the phase.
const (
	// ConditionCordoned: the node is cordoned and tainted for the maintenance.
	ConditionCordoned = "Cordoned"
	// ConditionLeaseHeld: the operator holds the node's lease.
	ConditionLeaseHeld = "LeaseHeld"
	// ConditionDrained: every pod that had to leave the node is gone.
	ConditionDrained = "Drained"
	// ConditionQueued: the maintenance waits for a slot under the operator's
	// max-unavailable limit; the node is not cordoned and its lease not
	// taken until it is False.
	ConditionQueued = "Queued"
)

// Condition reasons.
const (
	ReasonCordoned     = "Cordoned"
	ReasonNotCordoned  = "NotCordoned"
	ReasonRestored     = "Restored"
	ReasonRestoring    = "Restoring"
	ReasonLeaseHeld    = "LeaseHeld"
	ReasonLeaseNotHeld = "LeaseNotHeld"
	ReasonDraining     = "Draining"
	ReasonBlockedByPDB = "BlockedByPDB"
	ReasonWaiting      = "WaitingForPods"
	ReasonDrained      = "Drained"
	ReasonTimedOut     = "TimedOut"
	ReasonForced       = "Forced"
	ReasonFailed       = "Failed"
	// ReasonAdopted: Cordoned is True for a maintenance that another
	// medik8s-compatible operator started and this one took over. Its node's
	// state from before was not recorded, so deleting the NodeMaintenance
	// restores the node the medik8s way (uncordoned, the medik8s taints and
	// the exclude-from-remediation label removed); the message says so.
	ReasonAdopted = "Adopted"
	// ReasonWaitingForSlot: Queued is True, behind the maintenances its
	// message names.
	ReasonWaitingForSlot = "WaitingForSlot"
	// ReasonSlotAcquired: Queued is False, the maintenance has its slot.
	ReasonSlotAcquired = "SlotAcquired"
)

// PodReference names a pod.
type PodReference struct {
	// Namespace of the pod.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Name of the pod.
	// +optional
	Name string `json:"name,omitempty"`
}

// NodeMaintenanceStatus is the observed progress of a maintenance.
type NodeMaintenanceStatus struct {
	// Phase is the progress of the maintenance.
	// +optional
	Phase MaintenancePhase `json:"phase,omitempty"`

	// DrainProgress is the percentage of the pods that had to be evicted that
	// are gone.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	DrainProgress int `json:"drainProgress,omitempty"`

	// LastUpdate is the time of the last status change.
	// +optional
	LastUpdate metav1.Time `json:"lastUpdate,omitempty"`

	// LastError is the last reconcile error, empty when there is none.
	// +optional
	LastError string `json:"lastError,omitempty"`

	// PendingPods are the names of the pods not yet evicted.
	// +optional
	PendingPods []string `json:"pendingPods,omitempty"`

	// PendingPodsRefs are the pods not yet evicted, with their namespaces.
	// +optional
	PendingPodsRefs []PodReference `json:"pendingPodsRefs,omitempty"`

	// TotalPods is the number of pods on the node when the maintenance started.
	// +optional
	TotalPods int `json:"totalPods,omitempty"`

	// EvictionPods is the number of pods that had to be evicted, counted when
	// the maintenance started.
	// +optional
	EvictionPods int `json:"evictionPods,omitempty"`

	// ErrorOnLeaseCount counts consecutive failures to obtain or renew the node
	// lease; more than MaxLeaseErrors fail the maintenance.
	// +optional
	ErrorOnLeaseCount int `json:"errorOnLeaseCount,omitempty"`

	// Conditions are Queued, Cordoned, LeaseHeld and Drained, kept consistent with
	// the phase: `kubectl wait --for=condition=Drained` returns once the
	// maintenance succeeded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodeMaintenance puts a node into maintenance: the node is cordoned, tainted and
// drained while the NodeMaintenance exists, and restored when it is deleted.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=nm
// +kubebuilder:printcolumn:name="NodeName",type="string",JSONPath=".spec.nodeName",description="The node in maintenance"
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase",description="Running, Succeeded or Failed"
// +kubebuilder:printcolumn:name="Progress",type="integer",JSONPath=".status.drainProgress",description="Percent of the pods to evict that are gone"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".spec.reason",priority=1,description="Why the node is in maintenance"
// +kubebuilder:printcolumn:name="Pods",type="integer",JSONPath=".status.evictionPods",priority=1,description="Pods that had to be evicted"
// +kubebuilder:printcolumn:name="LastError",type="string",JSONPath=".status.lastError",priority=1,description="Last reconcile error"
type NodeMaintenance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NodeMaintenanceSpec   `json:"spec,omitempty"`
	Status NodeMaintenanceStatus `json:"status,omitempty"`
}

// NodeMaintenanceList is a list of NodeMaintenance.
//
// +kubebuilder:object:root=true
type NodeMaintenanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeMaintenance `json:"items"`
}
