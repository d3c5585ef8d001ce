package manager

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
)

// cacheOptions keep the cache to what the operator reads: node leases in
// their namespace, slim pods, and secrets only in the operator's namespace
// (the RBAC grants no more).
func cacheOptions(o Options) cache.Options {
	byObject := map[client.Object]cache.ByObject{
		&coordinationv1.Lease{}: {Namespaces: map[string]cache.Config{lease.Namespace: {}}},
		// Every pod of the cluster is cached: keep only what a drain reads.
		&corev1.Pod{}: {Transform: SlimPod},
	}
	if o.Namespace != "" {
		byObject[&corev1.Secret{}] = cache.ByObject{Namespaces: map[string]cache.Config{o.Namespace: {}}}
	}
	return cache.Options{
		// Managed fields are large and never read: leaving them out of the
		// pod cache is most of the operator's memory on big clusters.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject:         byObject,
	}
}
