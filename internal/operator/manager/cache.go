package manager

import (
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
)

// cacheOptions keep the cache to what the operator reads: node leases in
// their namespace, the Jobs of rollouts, and secrets only in the operator's namespace (the RBAC
// grants no more). Pods are not in it: the controller reads those of the
// nodes it drains from informers of their own (package nodepods).
func cacheOptions(o Options) cache.Options {
	byObject := map[client.Object]cache.ByObject{
		&coordinationv1.Lease{}: {Namespaces: map[string]cache.Config{lease.Namespace: {}}},
		// The step Jobs of rollouts, and no other Job.
		&batchv1.Job{}: {Label: labels.SelectorFromSet(nil).Add(rolloutLabelExists())},
	}
	if o.Namespace != "" {
		byObject[&corev1.Secret{}] = cache.ByObject{Namespaces: map[string]cache.Config{o.Namespace: {}}}
	}
	return cache.Options{
		// Managed fields are large and never read: no cached object keeps
		// them (the nodes above all, one per node of the cluster).
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject:         byObject,
	}
}

// rolloutLabelExists selects the objects labelled with a rollout's name.
func rolloutLabelExists() labels.Requirement {
	req, err := labels.NewRequirement(nmv1alpha1.RolloutLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant key: cannot fail
	}
	return *req
}
