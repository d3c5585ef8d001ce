package manager

import (
	"crypto/tls"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// tlsOptions of the webhook and metrics servers: HTTP/1.1 only unless
// enableHTTP2, since HTTP/2 exposes them to the Stream Cancellation and Rapid
// Reset attacks (CVE-2023-44487, CVE-2023-39325); kubebuilder does the same.
func tlsOptions(enableHTTP2 bool) []func(*tls.Config) {
	if enableHTTP2 {
		return nil
	}
	return []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
}

func webhookServer(o Options) webhook.Server {
	return webhook.NewServer(webhook.Options{
		Port: o.WebhookPort, Host: o.WebhookHost, CertDir: o.WebhookCertDir, TLSOpts: tlsOptions(o.EnableHTTP2),
	})
}

// The secure metrics endpoint asks the API server who a scraper is and
// whether it may get /metrics.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// metricsServerOptions serve plain HTTP, or with MetricsSecure HTTPS (a
// self-signed certificate) to authenticated and authorized scrapers only.
func metricsServerOptions(o Options) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.MetricsBindAddress, TLSOpts: tlsOptions(o.EnableHTTP2)}
	if o.MetricsSecure {
		m.SecureServing = true
		m.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return m
}
