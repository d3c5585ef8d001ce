package manager

import (
	"context"
	"fmt"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmwebhook "github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/webhook"
)

// setUpLocalWebhook runs the webhook out of cluster: it writes a private CA
// and a certificate for the webhook host into the certificate directory, and
// installs a webhook configuration that calls LocalWebhookURL trusting that CA.
func setUpLocalWebhook(ctx context.Context, c client.Client, o Options) error {
	caPEM, err := nmwebhook.WriteSelfSignedCerts(o.WebhookCertDir, []string{o.WebhookHost, "localhost"}, localCertificateValidity)
	if err != nil {
		return err
	}
	url := o.LocalWebhookURL
	return InstallWebhookConfiguration(ctx, c, o.WebhookConfigName, admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM})
}

// In-cluster webhook certificates: cert-controller keeps them in a secret and
// injects the CA into the webhook configuration.
// The secret lives in the operator's own namespace ("system" is replaced by it
// when the manifests are rendered), and the cache reads secrets only there.
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;list;watch;update

// setUpCertificates returns a channel closed once the webhook's certificates
// are in the certificate directory. Out of cluster, or with no secret named,
// they are there already; in-cluster, cert-controller issues them.
func setUpCertificates(ctx context.Context, mgr ctrl.Manager, c client.Client, o Options) (<-chan struct{}, error) {
	certsReady := make(chan struct{})
	if o.local() || o.WebhookSecretName == "" {
		close(certsReady)
		return certsReady, nil
	}
	// cert-controller fills a secret but does not create it.
	if err := ensureSecret(ctx, c, o.Namespace, o.WebhookSecretName); err != nil {
		return nil, err
	}
	err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey: types.NamespacedName{Namespace: o.Namespace, Name: o.WebhookSecretName},
		// Not mgr.GetWebhookServer(): that adds the server to the manager,
		// which then fails to start it before the certificates exist.
		CertDir:        o.WebhookCertDir,
		CAName:         "node-maintenance-operator-ca",
		CAOrganization: "nodemaintenance.medik8s.io",
		DNSName:        fmt.Sprintf("%s.%s.svc", o.WebhookServiceName, o.Namespace),
		IsReady:        certsReady,
		Webhooks:       []rotator.WebhookInfo{{Name: o.WebhookConfigName, Type: rotator.Validating}},
		// Every replica serves the webhook, so every replica keeps its certs.
		RequireLeaderElection: false,
	})
	if err != nil {
		return nil, fmt.Errorf("set up webhook certificate rotation: %w", err)
	}
	return certsReady, nil
}

func ensureSecret(ctx context.Context, c client.Client, namespace, name string) error {
	if namespace == "" {
		return fmt.Errorf("--namespace (or POD_NAMESPACE) is required for in-cluster webhook certificates in secret %s", name)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := c.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the webhook certificate secret %s/%s: %w", namespace, name, err)
	}
	return nil
}
