// Command node-maintenance-operator reconciles NodeMaintenance objects: it
// cordons, taints and drains nodes and restores them when the maintenance ends.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	// The time zones of rollout windows (spec.window.timeZone), for images
	// and hosts without /usr/share/zoneinfo.
	_ "time/tzdata"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/controller"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/manager"
)

func main() {
	var o manager.Options
	flag.StringVar(&o.MetricsBindAddress, "metrics-bind-address", manager.DefaultMetricsBindAddress, "Address the Prometheus metrics endpoint binds to; 0 disables it.")
	flag.BoolVar(&o.MetricsSecure, "metrics-secure", false, "Serve metrics over HTTPS to clients whose token the API server authenticates and allows to get /metrics (a self-signed certificate; the installation's metrics-reader ClusterRole grants it). Off: plain HTTP to anyone.")
	flag.BoolVar(&o.EnableHTTP2, "enable-http2", false, "Let the webhook and metrics servers speak HTTP/2. Off by default: HTTP/1.1 only avoids the HTTP/2 Stream Cancellation and Rapid Reset attacks (CVE-2023-44487, CVE-2023-39325).")
	flag.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", manager.DefaultHealthProbeBindAddress, "Address the /healthz and /readyz probes bind to.")
	flag.StringVar(&o.PprofBindAddress, "pprof-bind-address", "", "Address Go's /debug/pprof profiles are served on (e.g. 127.0.0.1:6060); empty: off.")
	flag.BoolVar(&o.LeaderElect, "leader-elect", false, "Elect a leader so that only one replica reconciles at a time.")
	flag.StringVar(&o.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "Namespace the operator runs in (leader election, webhook certificate secret).")
	flag.IntVar(&o.WebhookPort, "webhook-port", manager.DefaultWebhookPort, "Port the validating webhook listens on.")
	flag.StringVar(&o.WebhookHost, "webhook-host", "", fmt.Sprintf("Address the validating webhook listens on (empty: all; %s with --local-webhook-url).", manager.DefaultLocalWebhookHost))
	flag.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "", fmt.Sprintf("Directory of tls.crt and tls.key for the webhook (empty: %s; with --local-webhook-url %s).", manager.DefaultWebhookCertDir(), manager.DefaultLocalWebhookCertDir(manager.DefaultWebhookPort)))
	flag.StringVar(&o.WebhookConfigName, "webhook-config-name", manager.DefaultWebhookConfigName, "ValidatingWebhookConfiguration whose CA bundle the operator manages.")
	flag.StringVar(&o.WebhookServiceName, "webhook-service-name", manager.DefaultWebhookServiceName, "Service in front of the webhook (in-cluster certificates name it).")
	flag.StringVar(&o.WebhookSecretName, "webhook-secret-name", manager.DefaultWebhookSecretName, "Secret holding the in-cluster webhook certificates; empty: certificates come from --webhook-cert-dir.")
	flag.StringVar(&o.LocalWebhookURL, "local-webhook-url", "", "Run out of cluster: serve the webhook at this URL (e.g. https://127.0.0.1:9443) with a private CA and install a ValidatingWebhookConfiguration pointing at it.")
	flag.BoolVar(&o.InstallCRD, "install-crd", false, "Create or update the NodeMaintenance CRD at start.")
	flag.BoolVar(&o.Controller.AllowForceDrain, "allow-force-drain", false, "Admit spec.drain.onTimeout Force and carry it out: delete the pods left when a drain times out, bypassing their PodDisruptionBudgets. Needs the delete permission on pods.")
	flag.StringVar(&o.MaxUnavailable, "max-unavailable", "", "Most nodes in maintenance at once, as a count (2) or a percentage of all nodes (20%); empty: no limit.")
	flag.StringVar(&o.MaxUnavailablePolicy, "max-unavailable-policy", validation.DefaultMaxUnavailablePolicy, fmt.Sprintf("What happens to a NodeMaintenance created beyond --max-unavailable: %s (it waits, its node untouched, until a slot frees; first come first served) or %s (the webhook refuses the create).", validation.MaxUnavailableQueue, validation.MaxUnavailableRefuse))
	flag.DurationVar(&o.LeaseDuration, "lease-duration", lease.DefaultDuration, "Duration of the node leases; they are renewed every third of it.")
	flag.IntVar(&o.Controller.MaxConcurrentReconciles, "max-concurrent-reconciles", controller.DefaultMaxConcurrentReconciles, "NodeMaintenances worked on at once.")
	flag.IntVar(&o.Controller.EvictionParallelism, "eviction-parallelism", controller.DefaultEvictionParallelism, "Eviction calls in flight per node.")
	flag.DurationVar(&o.Controller.LeaseRetryInterval, "lease-retry-interval", controller.DefaultLeaseRetryInterval, fmt.Sprintf("Wait before retrying a node lease that could not be obtained; more than %d failures after the drain started fail the maintenance.", nmv1beta1.MaxLeaseErrors))
	flag.Func("notify-url", "Send the events of every NodeMaintenance (started, blocked, failed, succeeded, restored) as CloudEvents (structured JSON, HTTP POST) to this http or https URL; repeat the flag or separate URLs with commas. Rollouts send theirs to their spec.notify. See docs/guides/notifications.md.", listFlag(&o.NotifyURLs))
	flag.StringVar(&o.NotifyTokenFile, "notify-token-file", "", "File whose content is sent to every --notify-url as the bearer token (Authorization: Bearer <token>), read at each delivery, e.g. a mounted Secret's key; empty: no token.")
	flag.StringVar(&o.NotifyTokenSecret, "notify-token-secret", "", "<secret>/<key> of a Secret in the operator's namespace whose value is sent to every --notify-url as the bearer token, read at each delivery; instead of --notify-token-file.")
	printVersion := flag.Bool("version", false, "Print the version and the commit the binary was built from, and exit.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	if *printVersion {
		fmt.Println("node-maintenance-operator", version, buildRevision())
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	// The user and group show that the image's numeric USER (or the pod's
	// runAsUser/runAsGroup) took effect.
	ctrl.Log.WithName("setup").Info("starting node-maintenance-operator", "version", version,
		"revision", buildRevision(), "uid", os.Getuid(), "gid", os.Getgid())
	if os.Getenv("GOGC") == "" {
		// The caches (nodes above all, and the pods of the nodes being
		// drained) are most of the heap and live as long as the
		// process. Go's default (GOGC=100) lets the heap grow to twice the
		// live size between collections; half that headroom keeps the
		// resident size close to the cache for little CPU, since the
		// operator mostly waits on the API server. GOGC set in the
		// environment still wins.
		debug.SetGCPercent(gcPercent)
	}

	ctx := ctrl.SetupSignalHandler()
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fail("cannot find a cluster to connect to (use --kubeconfig, KUBECONFIG or run in a pod): %v", err)
	}
	mgr, err := manager.New(ctx, cfg, o)
	if err != nil {
		fail("%v", err)
	}
	if err := mgr.Start(ctx); err != nil {
		fail("the operator stopped: %v", err)
	}
}

// version is stamped by `make image` (-ldflags "-X main.version=v0.1.0").
var version = "(devel)"

// buildRevision is the commit the binary was built from, as Go recorded it
// (-buildvcs, which `make image` turns on), "+modified" if the working tree
// had changes; "unknown" without VCS information.
func buildRevision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, modified := "unknown", ""
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			modified = "+modified"
		}
	}
	return rev + modified
}

// listFlag appends each item of a comma-separated value to *dst, so that
// the flag may also be repeated.
func listFlag(dst *[]string) func(string) error {
	return func(v string) error {
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				*dst = append(*dst, item)
			}
		}
		return nil
	}
}

// gcPercent is the operator's GOGC unless the environment sets one.
const gcPercent = 50

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "node-maintenance-operator: "+format+"\n", args...)
	os.Exit(1)
}
