package kubeconfig

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// validate checks the attributes on their own, before any file is read, and
// returns the host normalised to a URL.
func (c Config) validate() (string, []Problem) {
	var problems []Problem
	add := func(attr, summary, detail string, args ...any) {
		problems = append(problems, Problem{Attribute: attr, Summary: summary, Detail: fmt.Sprintf(detail, args...)})
	}

	if c.ConfigPath != "" && len(c.ConfigPaths) > 0 {
		add("config_paths", "Conflicting Kubeconfig Paths",
			"config_path and config_paths are both set (directly or through %s and %s). "+
				"Use config_path for a single file or config_paths for a list of files, not both.",
			EnvConfigPath, EnvConfigPaths)
	}

	if c.Token != "" && c.Exec != nil {
		add("exec", "Conflicting Authentication Methods",
			"Both token (directly or through %s) and an exec block are set. They are two ways to authenticate "+
				"to the cluster and only one can be used: remove the exec block to use the fixed token, "+
				"or remove token to get credentials from the exec plugin.", EnvToken)
	}
	if c.Exec != nil {
		problems = append(problems, c.Exec.validate()...)
	}

	switch {
	case c.ClientCertificate != "" && c.ClientKey == "":
		add("client_key", "Missing Client Key",
			"client_certificate is set but client_key is not. A client certificate is useless without its private key: "+
				"set client_key (or %s) to the PEM-encoded key, or remove client_certificate.", EnvClientKey)
	case c.ClientKey != "" && c.ClientCertificate == "":
		add("client_certificate", "Missing Client Certificate",
			"client_key is set but client_certificate is not. A private key is useless without its certificate: "+
				"set client_certificate (or %s) to the PEM-encoded certificate, or remove client_key.", EnvClientCertificate)
	}

	if c.ClusterCACertificate != "" {
		if err := checkCertificates(c.ClusterCACertificate); err != nil {
			add("cluster_ca_certificate", "Invalid Cluster CA Certificate",
				"cluster_ca_certificate is not a usable PEM-encoded certificate: %v. "+
					"Provide the CA bundle that signed the API server's certificate, starting with \"-----BEGIN CERTIFICATE-----\".", err)
		}
	}
	certOK, keyOK := false, false
	if c.ClientCertificate != "" {
		if err := checkCertificates(c.ClientCertificate); err != nil {
			add("client_certificate", "Invalid Client Certificate",
				"client_certificate is not a usable PEM-encoded certificate: %v. "+
					"Provide the certificate itself, starting with \"-----BEGIN CERTIFICATE-----\".", err)
		} else {
			certOK = true
		}
	}
	if c.ClientKey != "" {
		if err := checkPrivateKey(c.ClientKey); err != nil {
			add("client_key", "Invalid Client Key",
				"client_key is not a usable PEM-encoded private key: %v. "+
					"Provide the key itself, starting with a line such as \"-----BEGIN PRIVATE KEY-----\".", err)
		} else {
			keyOK = true
		}
	}
	if certOK && keyOK {
		if _, err := tls.X509KeyPair([]byte(c.ClientCertificate), []byte(c.ClientKey)); err != nil {
			add("client_key", "Client Key Does Not Match Certificate",
				"client_key and client_certificate are both valid on their own but do not belong together: %v. "+
					"Check that both come from the same credential.", err)
		}
	}

	if c.Insecure != nil && *c.Insecure && c.ClusterCACertificate != "" {
		add("insecure", "Conflicting TLS Settings",
			"insecure is true, which skips verifying the API server's certificate, but cluster_ca_certificate is also set "+
				"to verify it. Remove insecure to verify against the CA certificate, or remove cluster_ca_certificate.")
	}

	var host string
	if c.Host != "" {
		h, err := normalizeHost(c.Host)
		if err != nil {
			add("host", "Invalid Host",
				"host is not a valid API server address: %v. Use a URL such as \"https://203.0.113.10:6443\" "+
					"or a host and port such as \"203.0.113.10:6443\" (https is assumed).", err)
		} else {
			host = h
		}
	}

	if c.ProxyURL != "" {
		if err := checkProxyURL(c.ProxyURL); err != nil {
			add("proxy_url", "Invalid Proxy URL",
				"proxy_url is not a usable proxy address: %v. Use an http, https or socks5 URL such as \"http://proxy.example.com:3128\".", err)
		}
	}

	// These attributes pick entries out of a kubeconfig, so without one they
	// would be silently ignored.
	if paths, _ := c.paths(); len(paths) == 0 {
		for _, a := range []struct{ attr, value, env string }{
			{"config_context", c.ConfigContext, EnvConfigContext},
			{"config_context_auth_info", c.ConfigContextAuthInfo, EnvConfigContextAuthInfo},
			{"config_context_cluster", c.ConfigContextCluster, EnvConfigContextCluster},
		} {
			if a.value != "" {
				add(a.attr, "Kubeconfig Entry Without a Kubeconfig",
					"%s is %q (set directly or through %s), but no kubeconfig file is configured to look it up in. "+
						"Set config_path or config_paths (or %s), or remove %s.",
					a.attr, a.value, a.env, EnvKubeconfig, a.attr)
			}
		}
	}
	return host, problems
}

func (e *ExecConfig) validate() []Problem {
	var problems []Problem
	switch e.APIVersion {
	case ExecAPIVersionV1, ExecAPIVersionV1beta1:
	case "":
		problems = append(problems, Problem{
			Attribute: "exec",
			Summary:   "Missing Exec API Version",
			Detail: fmt.Sprintf("The exec block has no api_version. Set it to the ExecCredential version your plugin prints, "+
				"usually %q or %q; the plugin's documentation says which.", ExecAPIVersionV1beta1, ExecAPIVersionV1),
		})
	case execAPIVersionV1alpha:
		problems = append(problems, Problem{
			Attribute: "exec",
			Summary:   "Unsupported Exec API Version",
			Detail: fmt.Sprintf("The exec block's api_version is %q, which Kubernetes clients no longer support. "+
				"Change it to %q (or %q if the plugin supports it), and update the plugin if it cannot produce that version.",
				e.APIVersion, ExecAPIVersionV1beta1, ExecAPIVersionV1),
		})
	default:
		problems = append(problems, Problem{
			Attribute: "exec",
			Summary:   "Unsupported Exec API Version",
			Detail: fmt.Sprintf("The exec block's api_version is %q, which is not an ExecCredential version. Use %q or %q.",
				e.APIVersion, ExecAPIVersionV1beta1, ExecAPIVersionV1),
		})
	}
	if strings.TrimSpace(e.Command) == "" {
		problems = append(problems, Problem{
			Attribute: "exec",
			Summary:   "Missing Exec Command",
			Detail:    "The exec block has no command. Set command to the credential plugin to run, for example \"aws\" or \"kubelogin\".",
		})
	}
	for name := range e.Env {
		if strings.TrimSpace(name) == "" {
			problems = append(problems, Problem{
				Attribute: "exec",
				Summary:   "Invalid Exec Environment",
				Detail:    "The exec block's env map has an entry with an empty name. Remove it or give it a name.",
			})
			break
		}
	}
	return problems
}

// normalizeHost accepts a URL or a bare host[:port] and returns a URL. A bare
// address gets https because client-go would otherwise treat it as plain
// http and quietly leave the credentials out of every request.
func normalizeHost(h string) (string, error) {
	s := strings.TrimSpace(h)
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", urlError(err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("the scheme %q is not http or https", u.Scheme)
	}
	if u.Hostname() == "" {
		return "", errors.New("it names no host")
	}
	if err := checkPort(u.Port()); err != nil {
		return "", err
	}
	return s, nil
}

func checkProxyURL(raw string) error {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return urlError(err)
	}
	switch u.Scheme {
	case "http", "https", "socks5":
	case "":
		return errors.New("it has no scheme")
	default:
		return fmt.Errorf("the scheme %q is not supported", u.Scheme)
	}
	if u.Hostname() == "" {
		return errors.New("it names no host")
	}
	return checkPort(u.Port())
}

func checkPort(p string) error {
	if p == "" {
		return nil
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("the port %q is not a number between 1 and 65535", p)
	}
	return nil
}

// urlError drops the URL that *url.Error repeats in its message, because a
// proxy URL in particular may carry a password.
func urlError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// checkCertificates accepts one or more PEM CERTIFICATE blocks. Its errors
// never quote the input: it may be a key pasted into the wrong attribute.
func checkCertificates(data string) error {
	rest := []byte(data)
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		n++
		if block.Type != "CERTIFICATE" {
			return fmt.Errorf("PEM block %d is a %q, not a CERTIFICATE", n, block.Type)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("certificate %d cannot be parsed (%v)", n, err)
		}
	}
	if n == 0 {
		return noPEMError(data)
	}
	return nil
}

func checkPrivateKey(data string) error {
	rest := []byte(data)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return noPEMError(data)
		}
		var err error
		switch block.Type {
		case "RSA PRIVATE KEY":
			_, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			_, err = x509.ParseECPrivateKey(block.Bytes)
		case "PRIVATE KEY":
			_, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		case "EC PARAMETERS":
			// openssl writes this block ahead of an EC key; the key follows.
			continue
		case "ENCRYPTED PRIVATE KEY":
			return errors.New("the key is encrypted with a passphrase, which the provider cannot prompt for; decrypt it first")
		default:
			return fmt.Errorf("it holds a %q PEM block, not a private key", block.Type)
		}
		if err != nil {
			return fmt.Errorf("the %s block cannot be parsed (%v)", block.Type, err)
		}
		return nil
	}
}

// noPEMError spots the most common mistake: pasting the base64 value of a
// kubeconfig's *-data field, which is PEM that still needs decoding.
func noPEMError(data string) error {
	compact := strings.Join(strings.Fields(data), "")
	if decoded, err := base64.StdEncoding.DecodeString(compact); err == nil {
		if block, _ := pem.Decode(decoded); block != nil {
			return errors.New("the value is base64-encoded PEM; decode it first, for example with Terraform's base64decode()")
		}
	}
	return errors.New("no PEM block was found")
}

// scrub is a last line of defence: no message is meant to quote a secret,
// but error text from libraries is not under our control.
func (c Config) scrub(problems []Problem) []Problem {
	secrets := []string{c.Token, c.ClientKey}
	for _, raw := range []string{c.ProxyURL, c.Host} {
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok {
				secrets = append(secrets, pw)
			}
		} else if i := strings.LastIndex(raw, "@"); i >= 0 {
			// Unparseable, so take everything before the last @ as userinfo.
			secrets = append(secrets, raw[:i])
		}
	}
	if c.Exec != nil {
		for _, v := range c.Exec.Env {
			secrets = append(secrets, v)
		}
	}
	out := make([]Problem, len(problems))
	for i, p := range problems {
		for _, s := range secrets {
			// Very short values would match ordinary words and add nothing.
			if len(strings.TrimSpace(s)) < 6 {
				continue
			}
			p.Summary = strings.ReplaceAll(p.Summary, s, "[redacted]")
			p.Detail = strings.ReplaceAll(p.Detail, s, "[redacted]")
		}
		out[i] = p
	}
	return out
}
