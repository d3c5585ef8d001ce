package kubeconfig

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// Environment variables read by WithEnv. They are exported so that the
// provider schema can name them in attribute descriptions.
const (
	EnvConfigPath            = "KUBE_CONFIG_PATH"
	EnvConfigPaths           = "KUBE_CONFIG_PATHS"
	EnvKubeconfig            = "KUBECONFIG"
	EnvConfigContext         = "KUBE_CTX"
	EnvConfigContextAuthInfo = "KUBE_CTX_AUTH_INFO"
	EnvConfigContextCluster  = "KUBE_CTX_CLUSTER"
	EnvHost                  = "KUBE_HOST"
	EnvToken                 = "KUBE_TOKEN"
	EnvClusterCACertificate  = "KUBE_CLUSTER_CA_CERT_DATA"
	EnvClientCertificate     = "KUBE_CLIENT_CERT_DATA"
	EnvClientKey             = "KUBE_CLIENT_KEY_DATA"
	EnvInsecure              = "KUBE_INSECURE"
	EnvTLSServerName         = "KUBE_TLS_SERVER_NAME"
	EnvProxyURL              = "KUBE_PROXY_URL"
)

// WithEnv returns a copy of c in which every unset field is filled from its
// KUBE_* environment variable. lookup is normally os.LookupEnv; a nil lookup
// means exactly that.
//
// KUBECONFIG is used as config_paths only when neither config_path nor
// config_paths is set by attribute or by KUBE_CONFIG_PATH(S). The only
// problem WithEnv can report is a KUBE_INSECURE value it cannot read.
func (c Config) WithEnv(lookup func(string) (string, bool)) (Config, []Problem) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	// An exported-but-empty variable is how shells usually "unset" things in
	// CI configuration, so it counts as not set rather than as an empty value.
	get := func(name string) (string, bool) {
		v, ok := lookup(name)
		if !ok || strings.TrimSpace(v) == "" {
			return "", false
		}
		return v, true
	}
	fill := func(field *string, name string) {
		if *field != "" {
			return
		}
		if v, ok := get(name); ok {
			*field = v
		}
	}

	out := c
	out.ConfigPaths = slices.Clone(c.ConfigPaths)
	if c.Exec != nil {
		e := c.Exec.clone()
		out.Exec = &e
	}
	if c.Insecure != nil {
		b := *c.Insecure
		out.Insecure = &b
	}

	// The two path attributes are alternatives. Once the user picked one in
	// the provider block, a stray variable for the other one in their shell
	// must not turn that into a conflict they never wrote.
	if out.ConfigPath == "" && len(out.ConfigPaths) == 0 {
		fill(&out.ConfigPath, EnvConfigPath)
		if v, ok := get(EnvConfigPaths); ok {
			out.ConfigPaths = splitPathList(v)
		}
		if out.ConfigPath == "" && len(out.ConfigPaths) == 0 {
			if v, ok := get(EnvKubeconfig); ok {
				out.ConfigPaths = splitPathList(v)
			}
		}
	}
	fill(&out.ConfigContext, EnvConfigContext)
	fill(&out.ConfigContextAuthInfo, EnvConfigContextAuthInfo)
	fill(&out.ConfigContextCluster, EnvConfigContextCluster)
	fill(&out.Host, EnvHost)
	fill(&out.Token, EnvToken)
	fill(&out.ClusterCACertificate, EnvClusterCACertificate)
	fill(&out.ClientCertificate, EnvClientCertificate)
	fill(&out.ClientKey, EnvClientKey)
	fill(&out.TLSServerName, EnvTLSServerName)
	fill(&out.ProxyURL, EnvProxyURL)

	var problems []Problem
	if out.Insecure == nil {
		if v, ok := get(EnvInsecure); ok {
			switch strings.TrimSpace(v) {
			case "true", "1":
				t := true
				out.Insecure = &t
			case "false", "0":
				f := false
				out.Insecure = &f
			default:
				problems = append(problems, Problem{
					Attribute: "insecure",
					Summary:   "Invalid KUBE_INSECURE Value",
					Detail: fmt.Sprintf("The environment variable %s is set to %q, which is not a boolean. "+
						"Set it to \"true\" or \"1\" to skip verifying the API server's certificate, "+
						"to \"false\" or \"0\" to verify it, or unset it.", EnvInsecure, v),
				})
			}
		}
	}
	return out, problems
}
