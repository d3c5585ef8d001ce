// Package manager assembles the operator: cache, controller, webhook, probes,
// metrics and certificates. The binary and the integration tests both build
// the operator through New, so the tests run exactly what ships.
package manager

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	kubedrain "k8s.io/kubectl/pkg/drain"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/controller"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/drain"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
	nmwebhook "github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/webhook"
)

// Scheme is what the operator reads and writes.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(Scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(Scheme))
	utilruntime.Must(nmv1beta1.AddToScheme(Scheme))
}

// Options configure the operator. The zero value plus a few names runs it
// in-cluster; set LocalWebhookURL to run it on a workstation.
type Options struct {
	MetricsBindAddress     string
	HealthProbeBindAddress string
	// PprofBindAddress serves Go's /debug/pprof profiles there; empty or 0: off.
	PprofBindAddress string
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
	// LeaseDuration of the node leases.
	LeaseDuration time.Duration
	Controller    controller.Options
}

// In-cluster webhook certificates: cert-controller keeps them in a secret and
// injects the CA into the webhook configuration.
// The secret lives in the operator's own namespace ("system" is replaced by it
// when the manifests are rendered), and the cache reads secrets only there.
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=get;list;watch;update

// New builds the operator's manager on cfg.
func New(ctx context.Context, cfg *rest.Config, o Options) (ctrl.Manager, error) {
	if o.WebhookPort == 0 {
		o.WebhookPort = 9443
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = "node-maintenance-operator.nodemaintenance.medik8s.io"
	}
	var maxUnavailable *intstr.IntOrString
	if o.MaxUnavailable != "" {
		v, err := nmwebhook.ParseMaxUnavailable(o.MaxUnavailable)
		if err != nil {
			return nil, err
		}
		maxUnavailable = &v
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
	local := o.LocalWebhookURL != ""
	if local {
		if o.WebhookCertDir == "" {
			o.WebhookCertDir = filepath.Join(os.TempDir(), fmt.Sprintf("node-maintenance-operator-%d", o.WebhookPort))
		}
		if o.WebhookConfigName == "" {
			o.WebhookConfigName = "node-maintenance-operator-local"
		}
		if o.WebhookHost == "" {
			o.WebhookHost = "127.0.0.1"
		}
		caPEM, err := nmwebhook.WriteSelfSignedCerts(o.WebhookCertDir, []string{o.WebhookHost, "localhost"}, 365*24*time.Hour)
		if err != nil {
			return nil, err
		}
		url := o.LocalWebhookURL
		if err := InstallWebhookConfiguration(ctx, direct, o.WebhookConfigName, admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM}); err != nil {
			return nil, err
		}
	}

	if o.WebhookCertDir == "" {
		o.WebhookCertDir = filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs")
	}

	byObject := map[client.Object]cache.ByObject{
		&coordinationv1.Lease{}: {Namespaces: map[string]cache.Config{lease.Namespace: {}}},
		// Every pod of the cluster is cached: keep only what a drain reads.
		&corev1.Pod{}: {Transform: SlimPod},
	}
	if o.Namespace != "" {
		byObject[&corev1.Secret{}] = cache.ByObject{Namespaces: map[string]cache.Config{o.Namespace: {}}}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  Scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsBindAddress},
		HealthProbeBindAddress:  o.HealthProbeBindAddress,
		PprofBindAddress:        o.PprofBindAddress,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        o.LeaderElectionID,
		LeaderElectionNamespace: o.Namespace,
		// Stepping down fast on shutdown lets a new replica take over at once.
		LeaderElectionReleaseOnCancel: true,
		WebhookServer: webhook.NewServer(webhook.Options{
			Port: o.WebhookPort, Host: o.WebhookHost, CertDir: o.WebhookCertDir,
		}),
		Cache: cache.Options{
			// Managed fields are large and never read: leaving them out of the
			// pod cache is most of the operator's memory on big clusters.
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject:         byObject,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("create the controller manager: %w", err)
	}

	certsReady := make(chan struct{})
	if local || o.WebhookSecretName == "" {
		close(certsReady)
	} else {
		// cert-controller fills a secret but does not create it.
		if err := ensureSecret(ctx, direct, o.Namespace, o.WebhookSecretName); err != nil {
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
	}

	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	reconciler := &controller.NodeMaintenanceReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("node-maintenance"),
		Leases:    &lease.Manager{Client: mgr.GetClient(), Reader: mgr.GetClient(), Duration: o.LeaseDuration},
		Evictor:   drain.KubectlEvictor(&kubedrain.Helper{Client: clientset, GracePeriodSeconds: -1}),
		Options:   o.Controller,
	}
	if err := reconciler.SetupWithManager(ctx, mgr); err != nil {
		return nil, fmt.Errorf("set up the NodeMaintenance controller: %w", err)
	}

	validator := &nmwebhook.Validator{Reader: mgr.GetAPIReader(), MaxUnavailable: maxUnavailable}
	// The webhook can only be registered once the certificates exist.
	if err := mgr.Add(runnableFunc(func(ctx context.Context) error {
		select {
		case <-certsReady:
		case <-ctx.Done():
			return nil
		}
		return validator.SetupWithManager(mgr)
	})); err != nil {
		return nil, err
	}
	// The pod cache holds slim copies (SlimPod): once the first list of every
	// pod has been taken in, the full objects it was decoded into are garbage.
	// Return that memory to the OS at once rather than over minutes, and log
	// what is held (make bench's P5 measures the effect on a large cluster).
	if err := mgr.Add(runnableFunc(func(ctx context.Context) error {
		if _, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{}); err != nil {
			return nil // stopping, or the informer failed; nothing to release
		}
		debug.FreeOSMemory()
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
		ctrl.Log.WithName("memory").Info("pod cache synced; unused memory returned to the OS",
			"heapInUseMB", ms.HeapInuse>>20, "heapReleasedMB", ms.HeapReleased>>20, "sysMB", ms.Sys>>20)
		return nil
	})); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("webhook", func(req *http.Request) error {
		select {
		case <-certsReady:
			return mgr.GetWebhookServer().StartedChecker()(req)
		default:
			return fmt.Errorf("webhook certificates are not ready yet")
		}
	}); err != nil {
		return nil, err
	}
	return mgr, nil
}

type runnableFunc func(context.Context) error

func (f runnableFunc) Start(ctx context.Context) error { return f(ctx) }

// InstallCRD creates or updates the embedded NodeMaintenance CRD and waits
// until it is established and served.
func InstallCRD(ctx context.Context, c client.Client) error {
	crd, err := config.CRD()
	if err != nil {
		return err
	}
	if err := createOrReplace(ctx, c, crd, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		return fmt.Errorf("install the NodeMaintenance CRD: %w", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
			return false, nil
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				// Established can come before discovery; a list proves it is served.
				return c.List(ctx, &nmv1beta1.NodeMaintenanceList{}) == nil, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the NodeMaintenance CRD was not established and served within a minute: %w", err)
	}
	return nil
}

// InstallWebhookConfiguration creates or updates the ValidatingWebhookConfiguration.
func InstallWebhookConfiguration(ctx context.Context, c client.Client, name string, cc admissionregistrationv1.WebhookClientConfig) error {
	vwc, err := config.ValidatingWebhookConfiguration(name, cc)
	if err != nil {
		return err
	}
	if err := createOrReplace(ctx, c, vwc, &admissionregistrationv1.ValidatingWebhookConfiguration{}); err != nil {
		return fmt.Errorf("install ValidatingWebhookConfiguration %s: %w", name, err)
	}
	return nil
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

func createOrReplace(ctx context.Context, c client.Client, obj, existing client.Object) error {
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), existing)
	if apierrors.IsNotFound(err) {
		return c.Create(ctx, obj)
	}
	if err != nil {
		return err
	}
	obj.SetResourceVersion(existing.GetResourceVersion())
	return c.Update(ctx, obj)
}
