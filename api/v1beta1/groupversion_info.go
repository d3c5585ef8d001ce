// Package v1beta1 contains the NodeMaintenance API, group nodemaintenance.medik8s.io.
// The group, kind, finalizer, taints, lease and label are those of the medik8s
// node-maintenance-operator, so clusters and tools that know it keep working.
//
// +kubebuilder:object:generate=true
// +groupName=nodemaintenance.medik8s.io
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of NodeMaintenance.
const Group = "nodemaintenance.medik8s.io"

var (
	// GroupVersion is the group and version of the NodeMaintenance API.
	GroupVersion = schema.GroupVersion{Group: Group, Version: "v1beta1"}

	// SchemeBuilder registers the API types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the API types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &NodeMaintenance{}, &NodeMaintenanceList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
