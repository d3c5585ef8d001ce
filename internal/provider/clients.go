package provider

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/kubeconfig"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	utilruntime.Must(nmv1beta1.AddToScheme(scheme))
	utilruntime.Must(nmv1alpha1.AddToScheme(scheme))
}

// clients is what Configure hands to resources and data sources.
type clients struct {
	kube client.WithWatch
	// cluster names the cluster in messages ("https://127.0.0.1:6443 (context kind)").
	cluster string
	// execPlugin is the credential plugin in use, if any.
	execPlugin *clientcmdapi.ExecConfig
}

func newClients(cfg *rest.Config, version, cluster string) (*clients, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = userAgent(version)
	// Terraform runs few requests; the defaults (5 QPS) only slow down waits.
	cfg.QPS, cfg.Burst = 50, 100
	var c client.WithWatch
	build := func() (err error) {
		c, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		return err
	}
	if cfg.ExecProvider != nil {
		// client-go builds the plugin's authenticator here, with the
		// os.Stderr of this moment: see kubeconfig.WithExecStderr.
		if err := kubeconfig.WithExecStderr(build); err != nil {
			return nil, err
		}
	} else if err := build(); err != nil {
		return nil, err
	}
	return &clients{kube: c, cluster: cluster, execPlugin: cfg.ExecProvider}, nil
}

// userAgent names the provider and its version (main.version, stamped by the
// release build) in every Kubernetes API request, so audit logs show which
// build drained a node.
func userAgent(version string) string { return "terraform-provider-nodemaintenance/" + version }

// configuredClients turns provider data into clients, or explains why there
// are none yet.
func configuredClients(data any, diags *diag.Diagnostics) *clients {
	if data == nil {
		return nil
	}
	c, ok := data.(*clients)
	if !ok {
		diags.AddError("Unexpected Provider Data",
			fmt.Sprintf("Expected *clients, got %T. This is a bug in the provider; please report it.", data))
		return nil
	}
	return c
}

func notConfigured(diags *diag.Diagnostics) {
	diags.AddError("Kubernetes Cluster Not Configured Yet",
		"The provider's cluster settings are not known yet (they depend on resources that are not created). "+
			"Apply those first (for example with -target), or configure the provider with known values.")
}

// addProblems turns kubeconfig problems into diagnostics on their attributes.
func addProblems(diags *diag.Diagnostics, problems []kubeconfig.Problem) {
	for _, p := range problems {
		if p.Attribute == "" {
			diags.AddError(p.Summary, p.Detail)
			continue
		}
		diags.AddAttributeError(path.Root(p.Attribute), p.Summary, p.Detail)
	}
}

// apiError adds a diagnostic for a failed API call: unreachable clusters,
// missing CRDs and permission problems get a sentence of advice; admission
// (webhook) refusals are passed on verbatim.
func (c *clients) apiError(diags *diag.Diagnostics, summary, what string, err error) {
	var urlErr *url.Error
	var netErr net.Error
	var tlsErr *tls.CertificateVerificationError
	switch {
	case isExecFailure(err):
		diags.AddError("Kubernetes Credential Plugin Failed",
			fmt.Sprintf("%s failed: the exec credential plugin could not get credentials for %s: %v%s\n\nFix what the plugin "+
				"reports (often: log in again), or check the exec block (or the exec section of the kubeconfig user).",
				what, c.cluster, err, c.pluginStderr()))
	case errors.As(err, &tlsErr):
		diags.AddError("Cannot Verify the API Server's Certificate",
			fmt.Sprintf("%s failed: the certificate of the API server at %s is not trusted: %v\n\nSet cluster_ca_certificate "+
				"(or the kubeconfig's certificate-authority-data) to the CA that signed the API server's certificate, and "+
				"tls_server_name if the certificate is for another name.", what, c.cluster, tlsErr))
	case errors.As(err, &urlErr) || errors.As(err, &netErr):
		diags.AddError("Cannot Reach the Kubernetes Cluster",
			fmt.Sprintf("%s failed: the API server at %s did not answer: %v\n\nCheck the provider's cluster settings "+
				"(config_path, host, KUBECONFIG) and that the cluster is up.", what, c.cluster, err))
	case apierrors.IsUnauthorized(err):
		diags.AddError("Kubernetes Refused the Credentials",
			fmt.Sprintf("%s failed: the API server at %s did not accept the provider's credentials (expired or wrong token or certificate?): %v\n\n"+
				"Check token, exec, client_certificate and client_key, or the user of the kubeconfig context.", what, c.cluster, err))
	case apierrors.IsAlreadyExists(err):
		diags.AddError(summary, fmt.Sprintf("%s failed: %s.\n\nAn object of that name exists in the cluster but not in this "+
			"Terraform state: import it (terraform import) to manage it, or choose another name.", what, apiMessage(err)))
	case apierrors.IsForbidden(err) && !isAdmissionDenial(err):
		diags.AddError("Not Allowed by Kubernetes RBAC",
			fmt.Sprintf("%s failed: %v\n\nThe provider's identity needs get, list, watch, create, update, patch and delete on "+
				"nodemaintenances.nodemaintenance.medik8s.io.", what, err))
	case isWebhookUnreachable(err):
		diags.AddError("NodeMaintenance Webhook Unreachable",
			fmt.Sprintf("%s failed: the API server could not call the node-maintenance operator's validating webhook, "+
				"so it refused the request and nothing was changed: %s\n\nCheck that the operator is running and ready "+
				"(for example `kubectl -n node-maintenance-operator get pods`) and that the API server can reach its webhook "+
				"Service, then run the command again. Deleting a NodeMaintenance does not need the webhook.", what, apiMessage(err)))
	case isNoMatch(err):
		diags.AddError("NodeMaintenance CRD Not Installed",
			fmt.Sprintf("%s failed: the cluster at %s does not serve nodemaintenances.nodemaintenance.medik8s.io: %v\n\n"+
				"Install the node-maintenance operator first: it installs the CRD (see the provider documentation).", what, c.cluster, err))
	case isAdmissionDenial(err):
		// The webhook words spec.drain in the API's names; here they are the
		// drain block's.
		diags.AddError(summary, fmt.Sprintf("%s failed: %s", what, terraformNames(apiMessage(err))))
	default:
		diags.AddError(summary, fmt.Sprintf("%s failed: %s", what, apiMessage(err)))
	}
}

// apiMessage is the API server's own message, which for a webhook refusal is
// the webhook's text.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}

// isWebhookUnreachable is the API server's answer when it could not call a
// webhook (connection refused, timeout, TLS failure) under failurePolicy Fail.
func isWebhookUnreachable(err error) bool {
	return apierrors.IsInternalError(err) && strings.Contains(err.Error(), "failed calling webhook")
}

func isAdmissionDenial(err error) bool {
	return err != nil && strings.Contains(err.Error(), "admission webhook")
}

func isNoMatch(err error) bool {
	if err == nil {
		return false
	}
	return meta.IsNoMatchError(err) || strings.Contains(err.Error(), "no matches for") ||
		apierrors.IsNotFound(err) && strings.Contains(err.Error(), "the server could not find the requested resource")
}

// isExecFailure is client-go's error when the exec credential plugin fails
// ("getting credentials: exec: executable ... failed with exit code 1"). It
// wraps it with %v, so only the text is left to recognise.
func isExecFailure(err error) bool {
	return err != nil && strings.Contains(err.Error(), "getting credentials: exec")
}

// pluginStderr is what the failing credential plugin said about why. The
// plugin ran once, inside client-go; kubeconfig.WithExecStderr kept the end
// of its stderr, which otherwise only reaches Terraform's debug log. It is
// not run again to hear it: it may prompt for MFA or have side effects.
func (c *clients) pluginStderr() string {
	if c.execPlugin == nil {
		return ""
	}
	if out := kubeconfig.ExecStderr(); out != "" {
		return "\n\nThe plugin's error output:\n" + out
	}
	return "\n\n" + kubeconfig.ExecStderrHint
}
