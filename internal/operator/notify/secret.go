package notify

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretToken is a Destination.Token that reads key of the Secret name in
// namespace (the operator's) through r at each delivery, so that a rotated
// token takes effect at once. An empty namespace cannot be read from: the
// operator was started without one.
func SecretToken(r client.Reader, namespace, name, key string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		if r == nil || namespace == "" {
			return "", fmt.Errorf("the bearer token is in Secret %s, in the operator's namespace, and the operator runs without one: set --namespace (or POD_NAMESPACE)", name)
		}
		secret := &corev1.Secret{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); err != nil {
			return "", fmt.Errorf("read the bearer token's Secret %s/%s: %w", namespace, name, err)
		}
		v, ok := secret.Data[key]
		if !ok || len(v) == 0 {
			return "", fmt.Errorf("key %q of Secret %s/%s, which holds the bearer token, is missing or empty: add it, or name another key", key, namespace, name)
		}
		return string(v), nil
	}
}
