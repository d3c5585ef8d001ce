// Package kubeconfig turns the provider's connection settings into a client-go
// *rest.Config.
//
// The attributes and environment variables deliberately match the ones people
// already use with the hashicorp/kubernetes provider, so that a provider block
// can be moved over without relearning how to point it at a cluster. The
// package knows nothing about terraform-plugin-framework: the provider maps its
// schema model onto Config and turns each Problem into a diagnostic on the
// named attribute.
package kubeconfig

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Exec credential plugin API versions accepted in the exec block.
const (
	ExecAPIVersionV1      = "client.authentication.k8s.io/v1"
	ExecAPIVersionV1beta1 = "client.authentication.k8s.io/v1beta1"
	execAPIVersionV1alpha = "client.authentication.k8s.io/v1alpha1"
)

// Config mirrors the provider block. An empty string or a nil pointer means
// the attribute was not set.
type Config struct {
	ConfigPath            string      // config_path, env KUBE_CONFIG_PATH
	ConfigPaths           []string    // config_paths, env KUBE_CONFIG_PATHS (split with filepath.ListSeparator)
	ConfigContext         string      // config_context, env KUBE_CTX
	ConfigContextAuthInfo string      // config_context_auth_info, env KUBE_CTX_AUTH_INFO
	ConfigContextCluster  string      // config_context_cluster, env KUBE_CTX_CLUSTER
	Host                  string      // host, env KUBE_HOST
	Token                 string      // token, env KUBE_TOKEN
	ClusterCACertificate  string      // cluster_ca_certificate (PEM), env KUBE_CLUSTER_CA_CERT_DATA
	ClientCertificate     string      // client_certificate (PEM), env KUBE_CLIENT_CERT_DATA
	ClientKey             string      // client_key (PEM), env KUBE_CLIENT_KEY_DATA
	Insecure              *bool       // insecure, env KUBE_INSECURE
	TLSServerName         string      // tls_server_name, env KUBE_TLS_SERVER_NAME
	ProxyURL              string      // proxy_url, env KUBE_PROXY_URL
	Exec                  *ExecConfig // exec block
}

// ExecConfig mirrors the exec block: a credential plugin that prints an
// ExecCredential, such as `aws eks get-token` or `gke-gcloud-auth-plugin`.
type ExecConfig struct {
	APIVersion string // api_version, e.g. client.authentication.k8s.io/v1beta1
	Command    string
	Args       []string
	Env        map[string]string
}

// Problem is a configuration error tied to one provider attribute, written
// for the person reading Terraform's output.
type Problem struct {
	// Attribute is the provider attribute the problem belongs to, such as
	// "config_path", "exec" or "token", or "" when it concerns the block as a
	// whole.
	Attribute string
	// Summary is a short Title Case headline.
	Summary string
	// Detail says what went wrong, with what, and what to do about it.
	Detail string
}

// String renders the problem on one line, for logs and test failures.
func (p Problem) String() string {
	if p.Attribute == "" {
		return p.Summary + ": " + p.Detail
	}
	return p.Attribute + ": " + p.Summary + ": " + p.Detail
}

// inClusterConfig is a variable so tests can pretend to run inside a pod.
var inClusterConfig = rest.InClusterConfig

// RESTConfig builds the client configuration described by c, without
// contacting the cluster. Explicit attributes win over whatever the kubeconfig
// file says. When neither a kubeconfig nor a host is given it falls back to
// the in-cluster service account.
//
// It returns (nil, problems) when anything is wrong, reporting as many
// independent problems as it can find at once so that one plan shows them all.
func (c Config) RESTConfig() (*rest.Config, []Problem) {
	host, problems := c.validate()
	if len(problems) > 0 {
		return nil, c.scrub(problems)
	}

	var (
		raw         *clientcmdapi.Config
		contextName string
		access      clientcmd.ConfigAccess
		origin      string // says where raw came from, for error messages
		attr        string // attribute blamed when client-go rejects raw
	)
	paths, pathAttr := c.paths()
	switch {
	case len(paths) > 0:
		rules, loaded, name, ps := c.loadKubeconfig(paths, pathAttr)
		if len(ps) > 0 {
			return nil, c.scrub(ps)
		}
		raw, contextName, access = loaded, name, rules
		origin = "the kubeconfig " + quoteList(paths)
		attr = pathAttr
	case host != "":
		raw = clientcmdapi.NewConfig()
		origin = "the provider settings"
	default:
		ic, err := inClusterConfig()
		if err != nil {
			return nil, c.scrub([]Problem{noClusterProblem(err)})
		}
		raw, contextName = inClusterKubeconfig(ic), inClusterName
		origin = "the in-cluster service account"
	}

	c.dropShadowedSettings(raw, contextName)
	cc := clientcmd.NewNonInteractiveClientConfig(*raw, contextName, c.overrides(host), access)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, c.scrub([]Problem{{
			Attribute: attr,
			Summary:   "Invalid Kubernetes Client Configuration",
			Detail: fmt.Sprintf("The Kubernetes client settings built from %s, combined with the provider attributes, "+
				"cannot be used: %v. Fix the settings it mentions, or override them with provider attributes.", origin, err),
		}})
	}
	return cfg, nil
}

// LoadedContext returns the kubeconfig context c will use: config_context if
// set, otherwise the current-context of the kubeconfig files. It returns ""
// when no kubeconfig is involved or it cannot be read; RESTConfig reports why.
// Pass the same Config that went to RESTConfig (after WithEnv).
func LoadedContext(c Config) string {
	if c.ConfigContext != "" {
		return c.ConfigContext
	}
	paths, _ := c.paths()
	var expanded []string
	for _, p := range paths {
		e, err := expandHome(p)
		if err != nil {
			return ""
		}
		expanded = append(expanded, e)
	}
	if len(expanded) == 0 {
		return ""
	}
	raw, err := (&clientcmd.ClientConfigLoadingRules{Precedence: expanded}).Load()
	if err != nil || raw == nil {
		return ""
	}
	return raw.CurrentContext
}

// Describe names the cluster cfg points at, for messages such as "cannot
// reach the cluster at ...", for example `https://127.0.0.1:6443 (context
// "kwok-x")`. Credentials embedded in the URL are left out.
func Describe(cfg *rest.Config, context string) string {
	where := "an unknown address"
	if cfg != nil && cfg.Host != "" {
		where = withoutCredentials(cfg.Host)
	}
	if context == "" {
		return where
	}
	return fmt.Sprintf("%s (context %q)", where, context)
}

// overrides translates the explicit attributes into clientcmd overrides, the
// same mechanism kubectl uses for its --server, --token, ... flags.
func (c Config) overrides(host string) *clientcmd.ConfigOverrides {
	o := &clientcmd.ConfigOverrides{
		CurrentContext: c.ConfigContext,
		Context: clientcmdapi.Context{
			AuthInfo: c.ConfigContextAuthInfo,
			Cluster:  c.ConfigContextCluster,
		},
		ClusterInfo: clientcmdapi.Cluster{
			Server:        host,
			TLSServerName: c.TLSServerName,
			ProxyURL:      c.ProxyURL,
		},
		AuthInfo: clientcmdapi.AuthInfo{
			Token: c.Token,
		},
	}
	if c.ClusterCACertificate != "" {
		o.ClusterInfo.CertificateAuthorityData = []byte(c.ClusterCACertificate)
	}
	if c.Insecure != nil {
		o.ClusterInfo.InsecureSkipTLSVerify = *c.Insecure
	}
	if c.ClientCertificate != "" {
		o.AuthInfo.ClientCertificateData = []byte(c.ClientCertificate)
	}
	if c.ClientKey != "" {
		o.AuthInfo.ClientKeyData = []byte(c.ClientKey)
	}
	if c.Exec != nil {
		o.AuthInfo.Exec = c.Exec.toClientcmd()
	}
	return o
}

// dropShadowedSettings removes from raw the settings that clientcmd overrides
// cannot take away, because overrides only ever add non-empty values.
func (c Config) dropShadowedSettings(raw *clientcmdapi.Config, contextName string) {
	var ctx *clientcmdapi.Context
	if contextName != "" {
		ctx = raw.Contexts[contextName]
	}

	userName := c.ConfigContextAuthInfo
	if userName == "" && ctx != nil {
		userName = ctx.AuthInfo
	}
	// An explicit token or exec block is a decision about how to log in. Left
	// alone, a token file or exec plugin from the kubeconfig would still be
	// used next to it (a token file even takes precedence over the token).
	if user := raw.AuthInfos[userName]; user != nil && (c.Token != "" || c.Exec != nil) {
		user.Token, user.TokenFile = "", ""
		user.Exec, user.AuthProvider = nil, nil
		user.Username, user.Password = "", ""
	}

	clusterName := c.ConfigContextCluster
	if clusterName == "" && ctx != nil {
		clusterName = ctx.Cluster
	}
	// insecure = false has to be able to switch verification back on for a
	// cluster the kubeconfig marks insecure-skip-tls-verify.
	if cluster := raw.Clusters[clusterName]; cluster != nil && c.Insecure != nil && !*c.Insecure {
		cluster.InsecureSkipTLSVerify = false
	}
}

const inClusterName = "in-cluster"

// inClusterKubeconfig wraps the in-cluster settings in a one-context
// kubeconfig so the explicit attributes override them through exactly the
// same rules as they override a kubeconfig file.
func inClusterKubeconfig(ic *rest.Config) *clientcmdapi.Config {
	raw := clientcmdapi.NewConfig()
	raw.Clusters[inClusterName] = &clientcmdapi.Cluster{
		Server:                   ic.Host,
		CertificateAuthority:     ic.CAFile,
		CertificateAuthorityData: ic.CAData,
		TLSServerName:            ic.ServerName,
	}
	raw.AuthInfos[inClusterName] = &clientcmdapi.AuthInfo{
		Token:     ic.BearerToken,
		TokenFile: ic.BearerTokenFile,
	}
	raw.Contexts[inClusterName] = &clientcmdapi.Context{Cluster: inClusterName, AuthInfo: inClusterName}
	raw.CurrentContext = inClusterName
	return raw
}

func noClusterProblem(inClusterErr error) Problem {
	return Problem{
		Summary: "No Kubernetes Cluster Configured",
		Detail: fmt.Sprintf("The provider found no cluster to connect to. It accepts, in this order:\n"+
			"  - a kubeconfig file: config_path or config_paths, or the %s, %s or %s environment variables;\n"+
			"  - an API server address: host (or %s), with token, exec or client_certificate/client_key for credentials;\n"+
			"  - the in-cluster service account, when Terraform runs inside a Kubernetes pod.\n"+
			"No kubeconfig and no host are set, and the in-cluster configuration is not available: %v.\n"+
			"Set config_path to your kubeconfig (often \"~/.kube/config\"), or set host and credentials.",
			EnvConfigPath, EnvConfigPaths, EnvKubeconfig, EnvHost, inClusterErr),
	}
}

func (e ExecConfig) clone() ExecConfig {
	out := e
	out.Args = slices.Clone(e.Args)
	if e.Env != nil {
		out.Env = make(map[string]string, len(e.Env))
		for k, v := range e.Env {
			out.Env[k] = v
		}
	}
	return out
}

func (e ExecConfig) toClientcmd() *clientcmdapi.ExecConfig {
	names := make([]string, 0, len(e.Env))
	for name := range e.Env {
		names = append(names, name)
	}
	// Map order is random; a stable order keeps plans and tests reproducible.
	sort.Strings(names)
	env := make([]clientcmdapi.ExecEnvVar, 0, len(names))
	for _, name := range names {
		env = append(env, clientcmdapi.ExecEnvVar{Name: name, Value: e.Env[name]})
	}
	return &clientcmdapi.ExecConfig{
		APIVersion: e.APIVersion,
		Command:    e.Command,
		Args:       slices.Clone(e.Args),
		Env:        env,
		// Terraform owns the terminal; a plugin that waits for input would
		// hang the run instead of failing it.
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}
}

func splitPathList(v string) []string {
	var out []string
	for _, p := range filepath.SplitList(v) {
		if strings.TrimSpace(p) != "" {
			out = append(out, p)
		}
	}
	return out
}

// expandHome expands a leading "~/", which Terraform users write out of
// habit but which no shell expands inside HCL strings.
func expandHome(p string) (string, error) {
	if p != "~" && !strings.HasPrefix(p, "~/") && !strings.HasPrefix(p, "~"+string(filepath.Separator)) {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, p[1:]), nil
}

func quoteList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	if len(quoted) == 1 {
		return "file " + quoted[0]
	}
	return "files " + strings.Join(quoted, ", ")
}

// available tells the user which names they can pick from.
func available[T any](kind, attr string, m map[string]T) string {
	if len(m) == 0 {
		return fmt.Sprintf("It defines no %ss at all; check that this is the kubeconfig you meant.", kind)
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, fmt.Sprintf("%q", name))
	}
	sort.Strings(names)
	return fmt.Sprintf("Set %s to one of the %ss it defines: %s.", attr, kind, strings.Join(names, ", "))
}

func withoutCredentials(raw string) string {
	u, err := url.Parse(raw)
	if err == nil && u.Host != "" {
		u.User = nil
		u.RawQuery, u.Fragment = "", ""
		return u.String()
	}
	if i := strings.LastIndex(raw, "@"); i >= 0 {
		return raw[i+1:]
	}
	return raw
}
