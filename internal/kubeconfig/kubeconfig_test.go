package kubeconfig

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// pki holds PEM material generated for one test.
type pki struct {
	ca, cert, key string
	otherKey      string // a valid key that does not match cert
}

func newPKI(t *testing.T) pki {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}

	clientKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	clientTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "test-user"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	clientDER, err := x509.CreateCertificate(rand.Reader, clientTmpl, caCert, &clientKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pki{
		ca:       string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})),
		cert:     string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: clientDER})),
		key:      keyPEM(t, clientKey),
		otherKey: keyPEM(t, caKey),
	}
}

func keyPEM(t *testing.T, k *ecdsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// cluster describes one context of a generated kubeconfig.
type cluster struct {
	context, server, token string
	insecure               bool
	ca                     []byte
	exec                   *clientcmdapi.ExecConfig
}

// writeKubeconfig writes a kubeconfig whose current-context is current and
// returns its path.
func writeKubeconfig(t *testing.T, dir, name, current string, clusters ...cluster) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for _, c := range clusters {
		cfg.Clusters[c.context+"-cluster"] = &clientcmdapi.Cluster{
			Server:                   c.server,
			InsecureSkipTLSVerify:    c.insecure,
			CertificateAuthorityData: c.ca,
		}
		cfg.AuthInfos[c.context+"-user"] = &clientcmdapi.AuthInfo{Token: c.token, Exec: c.exec}
		cfg.Contexts[c.context] = &clientcmdapi.Context{Cluster: c.context + "-cluster", AuthInfo: c.context + "-user"}
	}
	cfg.CurrentContext = current
	path := filepath.Join(dir, name)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func ptr[T any](v T) *T { return &v }

// withoutInCluster makes sure the in-cluster fallback fails even when the
// tests happen to run inside a pod.
func withoutInCluster(t *testing.T) {
	t.Helper()
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
}

func TestWithEnv(t *testing.T) {
	list := string(filepath.ListSeparator)
	tests := []struct {
		name     string
		in       Config
		env      map[string]string
		want     func(t *testing.T, got Config)
		wantAttr string // attribute of the single expected problem, "" for none
	}{
		{
			name: "fills every unset field",
			env: map[string]string{
				EnvConfigPath: "/k/config", EnvConfigContext: "ctx", EnvConfigContextAuthInfo: "user",
				EnvConfigContextCluster: "cl", EnvHost: "https://h:6443", EnvToken: "tok",
				EnvClusterCACertificate: "ca", EnvClientCertificate: "cert", EnvClientKey: "key",
				EnvInsecure: "true", EnvTLSServerName: "sni", EnvProxyURL: "http://p:3128",
			},
			want: func(t *testing.T, got Config) {
				want := Config{
					ConfigPath: "/k/config", ConfigContext: "ctx", ConfigContextAuthInfo: "user",
					ConfigContextCluster: "cl", Host: "https://h:6443", Token: "tok",
					ClusterCACertificate: "ca", ClientCertificate: "cert", ClientKey: "key",
					TLSServerName: "sni", ProxyURL: "http://p:3128",
				}
				gotNoBool := got
				gotNoBool.Insecure = nil
				if !equalConfig(gotNoBool, want) {
					t.Errorf("got %+v, want %+v", gotNoBool, want)
				}
				if got.Insecure == nil || !*got.Insecure {
					t.Errorf("Insecure = %v, want true", got.Insecure)
				}
			},
		},
		{
			name: "explicit values win over the environment",
			in:   Config{Host: "https://explicit", Token: "explicit-token", ConfigContext: "mine", Insecure: ptr(false)},
			env:  map[string]string{EnvHost: "https://env", EnvToken: "env-token", EnvConfigContext: "env-ctx", EnvInsecure: "true"},
			want: func(t *testing.T, got Config) {
				if got.Host != "https://explicit" || got.Token != "explicit-token" || got.ConfigContext != "mine" {
					t.Errorf("explicit value replaced: %+v", got)
				}
				if got.Insecure == nil || *got.Insecure {
					t.Errorf("Insecure = %v, want false", got.Insecure)
				}
			},
		},
		{
			name: "KUBE_CONFIG_PATHS is split on the list separator",
			env:  map[string]string{EnvConfigPaths: "/a" + list + list + "/b"},
			want: func(t *testing.T, got Config) {
				if strings.Join(got.ConfigPaths, ",") != "/a,/b" {
					t.Errorf("ConfigPaths = %q, want [/a /b]", got.ConfigPaths)
				}
			},
		},
		{
			name: "KUBECONFIG is the fallback",
			env:  map[string]string{EnvKubeconfig: "/x" + list + "/y"},
			want: func(t *testing.T, got Config) {
				if got.ConfigPath != "" || strings.Join(got.ConfigPaths, ",") != "/x,/y" {
					t.Errorf("got path %q paths %q, want paths [/x /y]", got.ConfigPath, got.ConfigPaths)
				}
			},
		},
		{
			name: "KUBECONFIG loses to KUBE_CONFIG_PATH",
			env:  map[string]string{EnvKubeconfig: "/x", EnvConfigPath: "/kube"},
			want: func(t *testing.T, got Config) {
				if got.ConfigPath != "/kube" || len(got.ConfigPaths) != 0 {
					t.Errorf("got path %q paths %q, want path /kube only", got.ConfigPath, got.ConfigPaths)
				}
			},
		},
		{
			name: "KUBECONFIG loses to explicit config_path",
			in:   Config{ConfigPath: "/explicit"},
			env:  map[string]string{EnvKubeconfig: "/x", EnvConfigPaths: "/y"},
			want: func(t *testing.T, got Config) {
				if got.ConfigPath != "/explicit" || len(got.ConfigPaths) != 0 {
					t.Errorf("got path %q paths %q, want path /explicit only", got.ConfigPath, got.ConfigPaths)
				}
			},
		},
		{
			name: "explicit config_paths keeps KUBE_CONFIG_PATH out",
			in:   Config{ConfigPaths: []string{"/p"}},
			env:  map[string]string{EnvConfigPath: "/env"},
			want: func(t *testing.T, got Config) {
				if got.ConfigPath != "" {
					t.Errorf("ConfigPath = %q, want it left unset", got.ConfigPath)
				}
			},
		},
		{
			name: "empty variables count as unset",
			env:  map[string]string{EnvHost: "", EnvInsecure: " ", EnvKubeconfig: ""},
			want: func(t *testing.T, got Config) {
				if got.Host != "" || got.Insecure != nil || len(got.ConfigPaths) != 0 {
					t.Errorf("got %+v, want nothing filled", got)
				}
			},
		},
		{name: "KUBE_INSECURE=1", env: map[string]string{EnvInsecure: "1"}, want: wantInsecure(true)},
		{name: "KUBE_INSECURE=0", env: map[string]string{EnvInsecure: "0"}, want: wantInsecure(false)},
		{name: "KUBE_INSECURE=false", env: map[string]string{EnvInsecure: "false"}, want: wantInsecure(false)},
		{
			name:     "KUBE_INSECURE=yes is a problem",
			env:      map[string]string{EnvInsecure: "yes"},
			wantAttr: "insecure",
			want: func(t *testing.T, got Config) {
				if got.Insecure != nil {
					t.Errorf("Insecure = %v, want unset", *got.Insecure)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problems := tt.in.WithEnv(env(tt.env))
			if tt.wantAttr == "" {
				if len(problems) != 0 {
					t.Fatalf("unexpected problems: %v", problems)
				}
			} else {
				if len(problems) != 1 || problems[0].Attribute != tt.wantAttr {
					t.Fatalf("problems = %v, want one on %q", problems, tt.wantAttr)
				}
				if !strings.Contains(problems[0].Detail, EnvInsecure) || !strings.Contains(problems[0].Detail, `"yes"`) {
					t.Errorf("detail does not name the variable and its value: %s", problems[0].Detail)
				}
			}
			tt.want(t, got)
		})
	}
}

func wantInsecure(want bool) func(*testing.T, Config) {
	return func(t *testing.T, got Config) {
		if got.Insecure == nil || *got.Insecure != want {
			t.Errorf("Insecure = %v, want %v", got.Insecure, want)
		}
	}
}

func equalConfig(a, b Config) bool {
	return a.ConfigPath == b.ConfigPath && strings.Join(a.ConfigPaths, "\x00") == strings.Join(b.ConfigPaths, "\x00") &&
		a.ConfigContext == b.ConfigContext && a.ConfigContextAuthInfo == b.ConfigContextAuthInfo &&
		a.ConfigContextCluster == b.ConfigContextCluster && a.Host == b.Host && a.Token == b.Token &&
		a.ClusterCACertificate == b.ClusterCACertificate && a.ClientCertificate == b.ClientCertificate &&
		a.ClientKey == b.ClientKey && a.TLSServerName == b.TLSServerName && a.ProxyURL == b.ProxyURL &&
		(a.Insecure == nil) == (b.Insecure == nil) && (a.Exec == nil) == (b.Exec == nil)
}

func TestWithEnvDoesNotModifyReceiver(t *testing.T) {
	in := Config{ConfigPaths: []string{"/a"}, Exec: &ExecConfig{Args: []string{"x"}, Env: map[string]string{"K": "V"}}}
	out, _ := in.WithEnv(env(nil))
	out.ConfigPaths[0] = "/changed"
	out.Exec.Args[0] = "changed"
	out.Exec.Env["K"] = "changed"
	if in.ConfigPaths[0] != "/a" || in.Exec.Args[0] != "x" || in.Exec.Env["K"] != "V" {
		t.Errorf("WithEnv shares memory with its receiver: %+v %+v", in, *in.Exec)
	}
}

func TestRESTConfigProblems(t *testing.T) {
	withoutInCluster(t)
	p := newPKI(t)
	dir := t.TempDir()
	good := writeKubeconfig(t, dir, "good", "alpha",
		cluster{context: "alpha", server: "https://alpha:6443", token: "alpha-token"},
		cluster{context: "beta", server: "https://beta:6443"})
	noCurrent := writeKubeconfig(t, dir, "no-current", "", cluster{context: "alpha", server: "https://alpha:6443"})
	dangling := writeKubeconfig(t, dir, "dangling", "gone", cluster{context: "alpha", server: "https://alpha:6443"})
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("clusters: [this is: not: yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "does-not-exist")
	b64CA := base64.StdEncoding.EncodeToString([]byte(p.ca))

	tests := []struct {
		name string
		cfg  Config
		attr string
		// detail must contain all of these
		detail []string
	}{
		{"both path attributes", Config{ConfigPath: good, ConfigPaths: []string{good}}, "config_paths", []string{"config_path", "config_paths"}},
		{"token and exec", Config{Host: "https://h", Token: "t0ken-value", Exec: &ExecConfig{APIVersion: ExecAPIVersionV1, Command: "c"}}, "exec", []string{"token", "exec"}},
		{"certificate without key", Config{Host: "https://h", ClientCertificate: p.cert}, "client_key", []string{"client_certificate", "client_key"}},
		{"key without certificate", Config{Host: "https://h", ClientKey: p.key}, "client_certificate", []string{"client_key", "client_certificate"}},
		{"missing config_path", Config{ConfigPath: missing}, "config_path", []string{missing, "no such file"}},
		{"missing file in config_paths", Config{ConfigPaths: []string{good, missing}}, "config_paths", []string{missing, "no such file"}},
		{"unparseable kubeconfig", Config{ConfigPath: garbage}, "config_path", []string{garbage, "not a valid kubeconfig"}},
		{"directory as kubeconfig", Config{ConfigPath: dir}, "config_path", []string{dir, "directory"}},
		{"unknown context", Config{ConfigPath: good, ConfigContext: "gamma"}, "config_context", []string{`"gamma"`, `"alpha", "beta"`, good}},
		{"unknown user", Config{ConfigPath: good, ConfigContextAuthInfo: "nobody"}, "config_context_auth_info", []string{`"nobody"`, `"alpha-user", "beta-user"`}},
		{"unknown cluster", Config{ConfigPath: good, ConfigContextCluster: "nowhere"}, "config_context_cluster", []string{`"nowhere"`, `"alpha-cluster", "beta-cluster"`}},
		{"no current context", Config{ConfigPath: noCurrent}, "config_path", []string{noCurrent, "current-context", `"alpha"`}},
		{"dangling current context", Config{ConfigPath: dangling}, "config_path", []string{dangling, `"gone"`, `"alpha"`}},
		{"context without kubeconfig", Config{Host: "https://h", ConfigContext: "alpha"}, "config_context", []string{"config_context", "config_path"}},
		{"invalid CA", Config{Host: "https://h", ClusterCACertificate: "not a certificate"}, "cluster_ca_certificate", []string{"cluster_ca_certificate", "no PEM"}},
		{"base64 CA", Config{Host: "https://h", ClusterCACertificate: b64CA}, "cluster_ca_certificate", []string{"base64decode"}},
		{"key as CA", Config{Host: "https://h", ClusterCACertificate: p.key}, "cluster_ca_certificate", []string{`"PRIVATE KEY"`}},
		{"invalid client certificate", Config{Host: "https://h", ClientCertificate: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", ClientKey: p.key}, "client_certificate", []string{"client_certificate", "cannot be parsed"}},
		{"invalid client key", Config{Host: "https://h", ClientCertificate: p.cert, ClientKey: "garbage"}, "client_key", []string{"client_key", "no PEM"}},
		{"mismatched key", Config{Host: "https://h", ClientCertificate: p.cert, ClientKey: p.otherKey}, "client_key", []string{"do not belong together"}},
		{"insecure with CA", Config{Host: "https://h", ClusterCACertificate: p.ca, Insecure: ptr(true)}, "insecure", []string{"insecure", "cluster_ca_certificate"}},
		{"host with space", Config{Host: "https://exa mple.com"}, "host", []string{"host", "invalid character"}},
		{"host with bad port", Config{Host: "example.com:99999"}, "host", []string{"99999"}},
		{"host with ftp scheme", Config{Host: "ftp://example.com"}, "host", []string{`"ftp"`}},
		{"proxy with ftp scheme", Config{Host: "https://h", ProxyURL: "ftp://proxy:21"}, "proxy_url", []string{"proxy_url", `"ftp"`}},
		{"proxy without scheme", Config{Host: "https://h", ProxyURL: "proxy.example.com"}, "proxy_url", []string{"no scheme"}},
		{"exec v1alpha1", Config{Host: "https://h", Exec: &ExecConfig{APIVersion: execAPIVersionV1alpha, Command: "aws"}}, "exec", []string{"v1alpha1", ExecAPIVersionV1beta1}},
		{"exec without api_version", Config{Host: "https://h", Exec: &ExecConfig{Command: "aws"}}, "exec", []string{"api_version"}},
		{"exec without command", Config{Host: "https://h", Exec: &ExecConfig{APIVersion: ExecAPIVersionV1}}, "exec", []string{"command"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, problems := tt.cfg.RESTConfig()
			if cfg != nil {
				t.Errorf("got a config for an invalid setup: host %q", cfg.Host)
			}
			var found *Problem
			for i := range problems {
				if problems[i].Attribute == tt.attr {
					found = &problems[i]
				}
			}
			if found == nil {
				t.Fatalf("no problem on %q; got %v", tt.attr, problems)
			}
			if len(problems) != 1 {
				t.Errorf("want exactly one problem, got %v", problems)
			}
			assertReadable(t, *found)
			for _, want := range tt.detail {
				if !strings.Contains(found.Detail, want) {
					t.Errorf("detail does not mention %q:\n%s", want, found.Detail)
				}
			}
		})
	}
}

// assertReadable checks the shape promised to the provider: a Title Case
// summary and a detail that is a sentence.
func assertReadable(t *testing.T, p Problem) {
	t.Helper()
	small := map[string]bool{"a": true, "an": true, "the": true, "of": true, "in": true, "to": true, "for": true, "and": true, "or": true}
	for _, word := range strings.Fields(p.Summary) {
		if !small[word] && strings.ToUpper(word[:1]) != word[:1] {
			t.Errorf("summary %q is not in Title Case (%q)", p.Summary, word)
		}
	}
	if p.Detail == "" || !strings.HasSuffix(strings.TrimSpace(p.Detail), ".") {
		t.Errorf("detail is not a finished sentence: %q", p.Detail)
	}
}

func TestRESTConfigFromKubeconfig(t *testing.T) {
	withoutInCluster(t)
	p := newPKI(t)
	dir := t.TempDir()
	path := writeKubeconfig(t, dir, "config", "alpha",
		cluster{context: "alpha", server: "https://alpha:6443", token: "alpha-token", ca: []byte(p.ca)},
		cluster{context: "beta", server: "https://beta:6443", token: "beta-token", insecure: true},
		cluster{context: "gamma", server: "https://gamma:6443", exec: &clientcmdapi.ExecConfig{
			APIVersion: ExecAPIVersionV1beta1, Command: "file-plugin", InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		}})
	second := writeKubeconfig(t, dir, "second", "", cluster{context: "delta", server: "https://delta:6443", token: "delta-token"})

	t.Setenv("HOME", dir)

	tests := []struct {
		name  string
		cfg   Config
		check func(t *testing.T, got *rest.Config)
	}{
		{
			name: "file as written",
			cfg:  Config{ConfigPath: path},
			check: func(t *testing.T, got *rest.Config) {
				if got.Host != "https://alpha:6443" || got.BearerToken != "alpha-token" || string(got.CAData) != p.ca {
					t.Errorf("host %q token %q CA set %v", got.Host, got.BearerToken, len(got.CAData) > 0)
				}
			},
		},
		{
			name: "home directory is expanded",
			cfg:  Config{ConfigPath: "~/config"},
			check: func(t *testing.T, got *rest.Config) {
				if got.Host != "https://alpha:6443" {
					t.Errorf("host = %q", got.Host)
				}
			},
		},
		{
			name: "config_context picks another context",
			cfg:  Config{ConfigPath: path, ConfigContext: "beta"},
			check: func(t *testing.T, got *rest.Config) {
				if got.Host != "https://beta:6443" || got.BearerToken != "beta-token" || !got.Insecure {
					t.Errorf("host %q token %q insecure %v", got.Host, got.BearerToken, got.Insecure)
				}
			},
		},
		{
			name: "config_paths merges files",
			cfg:  Config{ConfigPaths: []string{path, second}, ConfigContext: "delta"},
			check: func(t *testing.T, got *rest.Config) {
				if got.Host != "https://delta:6443" || got.BearerToken != "delta-token" {
					t.Errorf("host %q token %q", got.Host, got.BearerToken)
				}
			},
		},
		{
			name: "user and cluster picked separately",
			cfg:  Config{ConfigPath: path, ConfigContextAuthInfo: "beta-user", ConfigContextCluster: "alpha-cluster"},
			check: func(t *testing.T, got *rest.Config) {
				if got.Host != "https://alpha:6443" || got.BearerToken != "beta-token" {
					t.Errorf("host %q token %q", got.Host, got.BearerToken)
				}
			},
		},
		{
			name: "host, token and TLS server name override the file",
			cfg:  Config{ConfigPath: path, Host: "override:7443", Token: "override-token", TLSServerName: "api.internal"},
			check: func(t *testing.T, got *rest.Config) {
				if got.Host != "https://override:7443" || got.BearerToken != "override-token" || got.ServerName != "api.internal" {
					t.Errorf("host %q token %q server name %q", got.Host, got.BearerToken, got.ServerName)
				}
			},
		},
		{
			name: "insecure true overrides the file's CA",
			cfg:  Config{ConfigPath: path, Insecure: ptr(true)},
			check: func(t *testing.T, got *rest.Config) {
				if !got.Insecure || len(got.CAData) != 0 {
					t.Errorf("insecure %v, CA still set: %v", got.Insecure, len(got.CAData) > 0)
				}
			},
		},
		{
			name: "insecure false overrides the file's insecure-skip-tls-verify",
			cfg:  Config{ConfigPath: path, ConfigContext: "beta", Insecure: ptr(false)},
			check: func(t *testing.T, got *rest.Config) {
				if got.Insecure {
					t.Error("insecure still true")
				}
			},
		},
		{
			name: "insecure false with a CA verifies against that CA",
			cfg:  Config{ConfigPath: path, ConfigContext: "beta", Insecure: ptr(false), ClusterCACertificate: p.ca},
			check: func(t *testing.T, got *rest.Config) {
				if got.Insecure || string(got.CAData) != p.ca {
					t.Errorf("insecure %v, CA set %v", got.Insecure, len(got.CAData) > 0)
				}
			},
		},
		{
			name: "explicit token replaces the file's exec plugin",
			cfg:  Config{ConfigPath: path, ConfigContext: "gamma", Token: "override-token"},
			check: func(t *testing.T, got *rest.Config) {
				if got.ExecProvider != nil || got.BearerToken != "override-token" {
					t.Errorf("exec %v token %q", got.ExecProvider, got.BearerToken)
				}
			},
		},
		{
			name: "explicit exec replaces the file's token",
			cfg:  Config{ConfigPath: path, Exec: &ExecConfig{APIVersion: ExecAPIVersionV1, Command: "mine"}},
			check: func(t *testing.T, got *rest.Config) {
				if got.BearerToken != "" || got.ExecProvider == nil || got.ExecProvider.Command != "mine" {
					t.Errorf("token %q exec %v", got.BearerToken, got.ExecProvider)
				}
			},
		},
		{
			name: "client certificate and proxy",
			cfg:  Config{ConfigPath: path, ClientCertificate: p.cert, ClientKey: p.key, ProxyURL: "socks5://proxy:1080"},
			check: func(t *testing.T, got *rest.Config) {
				if string(got.CertData) != p.cert || string(got.KeyData) != p.key {
					t.Error("client certificate or key not applied")
				}
				if got.Proxy == nil {
					t.Fatal("proxy not applied")
				}
				req, _ := http.NewRequest(http.MethodGet, got.Host, nil)
				u, err := got.Proxy(req)
				if err != nil || u == nil || u.String() != "socks5://proxy:1080" {
					t.Errorf("proxy = %v, %v", u, err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problems := tt.cfg.RESTConfig()
			if len(problems) > 0 {
				t.Fatalf("unexpected problems: %v", problems)
			}
			tt.check(t, got)
		})
	}
}

func TestRESTConfigHostOnly(t *testing.T) {
	withoutInCluster(t)
	p := newPKI(t)
	got, problems := Config{Host: "127.0.0.1:6443", Token: "abc-token", ClusterCACertificate: p.ca}.RESTConfig()
	if len(problems) > 0 {
		t.Fatalf("unexpected problems: %v", problems)
	}
	// A bare address must become https, or client-go drops the token.
	if got.Host != "https://127.0.0.1:6443" || got.BearerToken != "abc-token" || string(got.CAData) != p.ca {
		t.Errorf("host %q token %q CA set %v", got.Host, got.BearerToken, len(got.CAData) > 0)
	}
}

func TestRESTConfigExec(t *testing.T) {
	withoutInCluster(t)
	got, problems := Config{
		Host: "https://h:6443",
		Exec: &ExecConfig{
			APIVersion: ExecAPIVersionV1beta1,
			Command:    "aws",
			Args:       []string{"eks", "get-token", "--cluster-name", "c"},
			Env:        map[string]string{"B": "2", "A": "1"},
		},
	}.RESTConfig()
	if len(problems) > 0 {
		t.Fatalf("unexpected problems: %v", problems)
	}
	e := got.ExecProvider
	if e == nil {
		t.Fatal("no exec provider")
	}
	if e.APIVersion != ExecAPIVersionV1beta1 || e.Command != "aws" || strings.Join(e.Args, " ") != "eks get-token --cluster-name c" {
		t.Errorf("exec = %+v", e)
	}
	if len(e.Env) != 2 || e.Env[0] != (clientcmdapi.ExecEnvVar{Name: "A", Value: "1"}) || e.Env[1] != (clientcmdapi.ExecEnvVar{Name: "B", Value: "2"}) {
		t.Errorf("env = %+v, want A=1 then B=2", e.Env)
	}
	if e.InteractiveMode != clientcmdapi.NeverExecInteractiveMode {
		t.Errorf("interactive mode = %q, want Never", e.InteractiveMode)
	}
}

func TestRESTConfigNoCluster(t *testing.T) {
	withoutInCluster(t)
	cfg, problems := Config{Token: "some-token-value"}.RESTConfig()
	if cfg != nil {
		t.Fatalf("got a config with nothing configured: %q", cfg.Host)
	}
	if len(problems) != 1 || problems[0].Attribute != "" {
		t.Fatalf("problems = %v, want one not tied to an attribute", problems)
	}
	assertReadable(t, problems[0])
	for _, want := range []string{"config_path", EnvKubeconfig, "host", "in-cluster", "KUBERNETES_SERVICE_HOST"} {
		if !strings.Contains(problems[0].Detail, want) {
			t.Errorf("detail does not mention %q:\n%s", want, problems[0].Detail)
		}
	}
	if strings.Contains(problems[0].Detail, "some-token-value") {
		t.Error("detail leaks the token")
	}
}

func TestRESTConfigInCluster(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("sa-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	stub := func(err error) func() (*rest.Config, error) {
		return func() (*rest.Config, error) {
			if err != nil {
				return nil, err
			}
			return &rest.Config{Host: "https://10.0.0.1:443", BearerToken: "sa-token", BearerTokenFile: tokenFile}, nil
		}
	}
	orig := inClusterConfig
	t.Cleanup(func() { inClusterConfig = orig })

	inClusterConfig = stub(nil)
	got, problems := Config{}.RESTConfig()
	if len(problems) > 0 {
		t.Fatalf("unexpected problems: %v", problems)
	}
	if got.Host != "https://10.0.0.1:443" || got.BearerToken != "sa-token" {
		t.Errorf("host %q token %q", got.Host, got.BearerToken)
	}

	// The token file would otherwise be re-read and win over the attribute.
	got, problems = Config{Token: "explicit-token"}.RESTConfig()
	if len(problems) > 0 {
		t.Fatalf("unexpected problems: %v", problems)
	}
	if got.BearerToken != "explicit-token" || got.BearerTokenFile != "" {
		t.Errorf("token %q token file %q", got.BearerToken, got.BearerTokenFile)
	}

	inClusterConfig = stub(errors.New("open /var/run/secrets/kubernetes.io/serviceaccount/token: permission denied"))
	_, problems = Config{}.RESTConfig()
	if len(problems) != 1 || !strings.Contains(problems[0].Detail, "permission denied") {
		t.Errorf("problems = %v, want the in-cluster error passed on", problems)
	}
}

func TestProblemsNeverContainSecrets(t *testing.T) {
	withoutInCluster(t)
	p := newPKI(t)
	const token = "s3cr3t-bearer-token-value"
	const password = "hunter2-proxy-password"
	keyBody := "c2VjcmV0LWtleS1tYXRlcmlhbA"
	brokenKey := "-----BEGIN PRIVATE KEY-----\n" + keyBody + "==\n-----END PRIVATE KEY-----\n"

	tests := []struct {
		name    string
		cfg     Config
		secrets []string
	}{
		{"token with exec", Config{Host: "https://h", Token: token, Exec: &ExecConfig{APIVersion: ExecAPIVersionV1, Command: "c"}}, []string{token}},
		{"token with no cluster", Config{Token: token}, []string{token}},
		{"broken key", Config{Host: "https://h", ClientCertificate: p.cert, ClientKey: brokenKey}, []string{keyBody}},
		{"key without certificate", Config{Host: "https://h", ClientKey: p.key}, []string{strings.Split(p.key, "\n")[1]}},
		{"mismatched key", Config{Host: "https://h", ClientCertificate: p.cert, ClientKey: p.otherKey}, []string{strings.Split(p.otherKey, "\n")[1]}},
		{"proxy with password and bad scheme", Config{Host: "https://h", ProxyURL: "ftp://user:" + password + "@proxy:21"}, []string{password}},
		{"proxy with password and bad port", Config{Host: "https://h", ProxyURL: "http://user:" + password + "@proxy:port"}, []string{password}},
		{"host with password and bad port", Config{Host: "https://user:" + password + "@h:port"}, []string{password}},
		{"exec env with token conflict", Config{Host: "https://h", Token: token, Exec: &ExecConfig{
			APIVersion: execAPIVersionV1alpha, Command: "c", Env: map[string]string{"SECRET": "exec-env-secret-value"},
		}}, []string{token, "exec-env-secret-value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, problems := tt.cfg.RESTConfig()
			if len(problems) == 0 {
				t.Fatal("expected at least one problem")
			}
			for _, pr := range problems {
				for _, s := range tt.secrets {
					if strings.Contains(pr.Summary, s) || strings.Contains(pr.Detail, s) {
						t.Errorf("problem leaks %q: %v", s, pr)
					}
				}
			}
		})
	}
}

func TestLoadedContextAndDescribe(t *testing.T) {
	dir := t.TempDir()
	path := writeKubeconfig(t, dir, "config", "kwok-x", cluster{context: "kwok-x", server: "https://127.0.0.1:6443"})

	if got := LoadedContext(Config{ConfigPath: path}); got != "kwok-x" {
		t.Errorf("LoadedContext from file = %q, want kwok-x", got)
	}
	if got := LoadedContext(Config{ConfigPath: path, ConfigContext: "other"}); got != "other" {
		t.Errorf("LoadedContext with config_context = %q, want other", got)
	}
	if got := LoadedContext(Config{Host: "https://h"}); got != "" {
		t.Errorf("LoadedContext without kubeconfig = %q, want empty", got)
	}

	tests := []struct {
		name    string
		cfg     *rest.Config
		context string
		want    string
	}{
		{"with context", &rest.Config{Host: "https://127.0.0.1:6443"}, "kwok-x", `https://127.0.0.1:6443 (context "kwok-x")`},
		{"without context", &rest.Config{Host: "https://10.0.0.1"}, "", "https://10.0.0.1"},
		{"credentials stripped", &rest.Config{Host: "https://admin:pw@10.0.0.1:6443?x=y"}, "", "https://10.0.0.1:6443"},
		{"credentials stripped from bare address", &rest.Config{Host: "admin:pw@10.0.0.1:6443"}, "", "10.0.0.1:6443"},
		{"nil config", nil, "c", `an unknown address (context "c")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Describe(tt.cfg, tt.context); got != tt.want {
				t.Errorf("Describe = %q, want %q", got, tt.want)
			}
		})
	}

	// The full path: what RESTConfig builds is what Describe names.
	cfg, problems := Config{ConfigPath: path}.RESTConfig()
	if len(problems) > 0 {
		t.Fatalf("unexpected problems: %v", problems)
	}
	if got := Describe(cfg, LoadedContext(Config{ConfigPath: path})); got != `https://127.0.0.1:6443 (context "kwok-x")` {
		t.Errorf("Describe = %q", got)
	}
}

// No message is written to quote a secret, so scrub is exercised directly:
// it guards against library error text that might.
func TestScrub(t *testing.T) {
	c := Config{
		Token:    "s3cr3t-bearer-token-value",
		ProxyURL: "http://user:hunter2-proxy-password@proxy:3128",
		Host:     "https://admin:host-password-123@h:bad",
		Exec:     &ExecConfig{Env: map[string]string{"K": "exec-env-secret-value", "SHORT": "1"}},
	}
	in := []Problem{{
		Summary: "Leak s3cr3t-bearer-token-value",
		Detail:  "token s3cr3t-bearer-token-value proxy hunter2-proxy-password host https://admin:host-password-123 env exec-env-secret-value, 1 thing.",
	}}
	got := c.scrub(in)
	for _, s := range []string{"s3cr3t-bearer-token-value", "hunter2-proxy-password", "host-password-123", "exec-env-secret-value"} {
		if strings.Contains(got[0].Summary+got[0].Detail, s) {
			t.Errorf("scrub left %q in %v", s, got[0])
		}
	}
	if !strings.Contains(got[0].Detail, "1 thing.") {
		t.Errorf("scrub replaced a short value that is not worth hiding: %q", got[0].Detail)
	}
	if !strings.Contains(in[0].Detail, "s3cr3t") {
		t.Error("scrub modified its input")
	}
}
