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
}

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
	// lease; more than 3 fail the maintenance.
	// +optional
	ErrorOnLeaseCount int `json:"errorOnLeaseCount,omitempty"`
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
