// Package manager assembles the operator: cache, controller, webhook, probes,
// metrics and certificates. The binary and the integration tests both build
// the operator through New, so the tests run exactly what ships.
//
// New reads top to bottom; each concern has its own file: certs.go (webhook
// certificates), cache.go (what the cache holds), servers.go (metrics and
// webhook servers), runnables.go (controller, webhook, probes), install.go
// (the CRD and the webhook configuration).
package manager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/controller"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/notify"
)

// Scheme is what the operator reads and writes.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(Scheme))
	utilruntime.Must(nmv1beta1.AddToScheme(Scheme))
	utilruntime.Must(nmv1alpha1.AddToScheme(Scheme))
}

// Defaults of Options and of the operator's flags. Names and ports are the
// installation's (package config), so the binary run without flags matches
// what the provider deploys.
const (
	DefaultWebhookPort       = config.WebhookPort
	DefaultLeaderElectionID  = "node-maintenance-operator.nodemaintenance.medik8s.io"
	DefaultWebhookConfigName = config.OperatorName
	// DefaultLocalWebhookConfigName and DefaultLocalWebhookHost replace an
	// empty WebhookConfigName and WebhookHost when LocalWebhookURL is set.
	DefaultLocalWebhookConfigName = config.OperatorName + "-local"
	DefaultLocalWebhookHost       = "127.0.0.1"
	DefaultWebhookServiceName     = config.WebhookServiceName
	DefaultWebhookSecretName      = config.WebhookSecretName
	// localCertificateValidity is how long the private CA and certificate of
	// an out-of-cluster operator are valid (they are issued anew at start).
	localCertificateValidity = 365 * 24 * time.Hour
)

// DefaultMetricsBindAddress and DefaultHealthProbeBindAddress listen on the
// ports the installation's Deployment declares.
var (
	DefaultMetricsBindAddress     = fmt.Sprintf(":%d", config.MetricsPort)
	DefaultHealthProbeBindAddress = fmt.Sprintf(":%d", config.HealthPort)
)

// DefaultWebhookCertDir is controller-runtime's certificate directory, used
// when WebhookCertDir is empty and the operator runs in-cluster.
func DefaultWebhookCertDir() string {
	return filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
}

// DefaultLocalWebhookCertDir is where an out-of-cluster operator writes its
// private CA and certificate when WebhookCertDir is empty.
func DefaultLocalWebhookCertDir(webhookPort int) string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("node-maintenance-operator-%d", webhookPort))
}

// Options configure the operator. The zero value plus a few names runs it
// in-cluster; set LocalWebhookURL to run it on a workstation. Empty fields
// take the Default* above where withDefaults says so; the others keep
// controller-runtime's meaning (an empty HealthProbeBindAddress is off).
type Options struct {
	MetricsBindAddress string
	// MetricsSecure serves metrics over HTTPS, to clients whose token the API
	// server authenticates and allows `get` on the /metrics non-resource URL.
	MetricsSecure          bool
	HealthProbeBindAddress string
	// PprofBindAddress serves Go's /debug/pprof profiles there; empty or 0: off.
	PprofBindAddress string
	// EnableHTTP2 lets the webhook and metrics servers speak HTTP/2. Off, they
	// speak HTTP/1.1 only, out of reach of the HTTP/2 Stream Cancellation and
	// Rapid Reset attacks (CVE-2023-44487, CVE-2023-39325).
	EnableHTTP2      bool
	LeaderElect      bool
	LeaderElectionID string
	// Namespace the operator runs in (leader election, webhook certificate secret).
	Namespace string

	WebhookPort    int
	WebhookHost    string
	WebhookCertDir string
	// WebhookConfigName is the ValidatingWebhookConfiguration the operator keeps
	// the CA bundle of (in-cluster) or installs (out of cluster).
	WebhookConfigName string
	// WebhookServiceName and WebhookSecretName: in-cluster certificates are
	// issued for <service>.<namespace>.svc and kept in the secret.
	WebhookServiceName string
	WebhookSecretName  string
	// LocalWebhookURL (e.g. https://127.0.0.1:9443) runs the operator out of
	// cluster: a private CA is generated, and a ValidatingWebhookConfiguration
	// pointing at this URL is installed.
	LocalWebhookURL string
	// InstallCRD creates or updates the NodeMaintenance CRD at start.
	InstallCRD bool

	// MaxUnavailable bounds the nodes in maintenance at once ("2" or "20%").
	MaxUnavailable string
	// MaxUnavailablePolicy is what happens to a NodeMaintenance created
	// beyond MaxUnavailable: validation.MaxUnavailableQueue (the default:
	// the controller queues it) or validation.MaxUnavailableRefuse (the
	// webhook refuses it).
	MaxUnavailablePolicy string
	// LeaseDuration of the node leases.
	LeaseDuration time.Duration
	Controller    controller.Options

	// NotifyURLs receive the events of every NodeMaintenance as CloudEvents
	// (--notify-url); rollouts send theirs to their spec.notify.
	NotifyURLs []string
	// NotifyTokenFile holds the bearer token sent to NotifyURLs, read at
	// each delivery (--notify-token-file); NotifyTokenSecret names it as
	// <secret>/<key> of a Secret in Namespace (--notify-token-secret).
	// Both empty: no token.
	NotifyTokenFile, NotifyTokenSecret string
	// Notify tunes the delivery of every notification (retries, timeouts).
	Notify notify.Options
}

// local reports whether the operator runs out of cluster.
func (o Options) local() bool { return o.LocalWebhookURL != "" }

// withDefaults fills the empty fields that have a default.
func (o Options) withDefaults() Options {
	if o.WebhookPort == 0 {
		o.WebhookPort = DefaultWebhookPort
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = DefaultLeaderElectionID
	}
	if o.local() {
		if o.WebhookCertDir == "" {
			o.WebhookCertDir = DefaultLocalWebhookCertDir(o.WebhookPort)
		}
		if o.WebhookConfigName == "" {
			o.WebhookConfigName = DefaultLocalWebhookConfigName
		}
		if o.WebhookHost == "" {
			o.WebhookHost = DefaultLocalWebhookHost
		}
	}
	if o.WebhookCertDir == "" {
		o.WebhookCertDir = DefaultWebhookCertDir()
	}
	if !o.local() && o.Namespace != "" && o.Controller.OperatorDeployment.Name == "" {
		// Installed in-cluster: its own pods are drained last.
		o.Controller.OperatorDeployment = types.NamespacedName{Namespace: o.Namespace, Name: config.OperatorName}
	}
	return o
}

// New builds the operator's manager on cfg.
func New(ctx context.Context, cfg *rest.Config, o Options) (ctrl.Manager, error) {
	o = o.withDefaults()
	queueBeyond, refuseBeyond, err := maxUnavailableLimits(o)
	if err != nil {
		return nil, err
	}
	o.Controller.MaxUnavailable = queueBeyond
	sender, err := newSender(o)
	if err != nil {
		return nil, err
	}

	direct, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		return nil, fmt.Errorf("create a Kubernetes client: %w", err)
	}
	if o.InstallCRD {
		if err := InstallCRD(ctx, direct); err != nil {
			return nil, err
		}
	}
	if o.local() {
		if err := setUpLocalWebhook(ctx, direct, o); err != nil {
			return nil, err
		}
	}

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  Scheme,
		Metrics:                 metricsServerOptions(o),
		HealthProbeBindAddress:  o.HealthProbeBindAddress,
		PprofBindAddress:        o.PprofBindAddress,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        o.LeaderElectionID,
		LeaderElectionNamespace: o.Namespace,
		// Stepping down fast on shutdown lets a new replica take over at once.
		LeaderElectionReleaseOnCancel: true,
		WebhookServer:                 webhookServer(o),
		Cache:                         cacheOptions(o),
	})
	if err != nil {
		return nil, fmt.Errorf("create the controller manager: %w", err)
	}
	certsReady, err := setUpCertificates(ctx, mgr, direct, o)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(sender); err != nil {
		return nil, err
	}
	if err := addRunnables(ctx, mgr, cfg, o, refuseBeyond, certsReady, sender); err != nil {
		return nil, err
	}
	return mgr, nil
}

// maxUnavailableLimits reads --max-unavailable and its policy, and says who
// enforces the limit: the controller, which queues the NodeMaintenances
// beyond it (Queue), or the webhook, which refuses them (Refuse). Both are
// nil without a limit.
func maxUnavailableLimits(o Options) (queueBeyond, refuseBeyond *intstr.IntOrString, err error) {
	policy, err := validation.ParseMaxUnavailablePolicy(o.MaxUnavailablePolicy)
	if err != nil {
		return nil, nil, err
	}
	if o.MaxUnavailable == "" {
		return nil, nil, nil
	}
	v, err := validation.ParseMaxUnavailable(o.MaxUnavailable)
	if err != nil {
		return nil, nil, err
	}
	if policy == validation.MaxUnavailableRefuse {
		return nil, &v, nil
	}
	return &v, nil, nil
}
