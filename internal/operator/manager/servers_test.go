package manager

import (
	"crypto/tls"
	"slices"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

func TestTLSOptionsOfferHTTP2OnlyWhenEnabled(t *testing.T) {
	for _, tc := range []struct {
		enableHTTP2 bool
		want        []string
	}{
		// Go's TLS server offers h2 when NextProtos is left as it is; the
		// servers keep what they were given.
		{enableHTTP2: true, want: []string{"h2", "http/1.1"}},
		{enableHTTP2: false, want: []string{"http/1.1"}},
	} {
		c := &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
		for _, opt := range tlsOptions(tc.enableHTTP2) {
			opt(c)
		}
		if !slices.Equal(c.NextProtos, tc.want) {
			t.Errorf("enableHTTP2=%v: NextProtos %v, want %v", tc.enableHTTP2, c.NextProtos, tc.want)
		}
	}
}

// Both TLS servers get the options that keep HTTP/2 off; metrics are HTTPS
// with authentication and authorization only when asked.
func TestServersTLSAndSecureMetrics(t *testing.T) {
	o := Options{MetricsBindAddress: ":0", MetricsSecure: true}.withDefaults()
	m := metricsServerOptions(o)
	if !m.SecureServing || m.FilterProvider == nil {
		t.Errorf("MetricsSecure: SecureServing %v, filter provider set %v; want HTTPS with authentication and authorization", m.SecureServing, m.FilterProvider != nil)
	}
	if len(m.TLSOpts) != 1 {
		t.Errorf("the metrics server has %d TLS options, want the one that turns HTTP/2 off", len(m.TLSOpts))
	}
	if plain := metricsServerOptions(Options{}.withDefaults()); plain.SecureServing || plain.FilterProvider != nil {
		t.Error("without MetricsSecure the metrics are served as before: plain HTTP, no filter")
	}
	w, ok := webhookServer(o).(*webhook.DefaultServer)
	if !ok {
		t.Fatalf("webhookServer returned %T", webhookServer(o))
	}
	if len(w.Options.TLSOpts) != 1 || w.Options.Port != DefaultWebhookPort || w.Options.CertDir != o.WebhookCertDir {
		t.Errorf("webhook server options %+v", w.Options)
	}
	if h2 := metricsServerOptions(Options{EnableHTTP2: true}); len(h2.TLSOpts) != 0 {
		t.Error("EnableHTTP2 still drops h2 from the metrics server")
	}
}
