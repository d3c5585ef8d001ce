// Package v1alpha1 contains the project's own API, group nodemaintenance.io:
// NodeMaintenanceRollout, which maintains a set of nodes in turn through
// NodeMaintenances of nodemaintenance.medik8s.io/v1beta1 that it owns.
//
// +kubebuilder:object:generate=true
// +groupName=nodemaintenance.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of the project's own kinds.
const Group = "nodemaintenance.io"

var (
	// GroupVersion is the group and version of NodeMaintenanceRollout.
	GroupVersion = schema.GroupVersion{Group: Group, Version: "v1alpha1"}

	// SchemeBuilder registers the API types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the API types to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &NodeMaintenanceRollout{}, &NodeMaintenanceRolloutList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
