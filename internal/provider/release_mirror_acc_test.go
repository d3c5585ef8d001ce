package provider_test

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/dirhash"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/webhook"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// releaseSource is the address users write in required_providers; the
// mirrors serve the provider under it.
const (
	releaseSource   = "registry.terraform.io/nodemaintenance/nodemaintenance"
	releaseProject  = "terraform-provider-nodemaintenance"
	userAgentPrefix = releaseProject + "/"
)

// releasePlatforms are the platforms .goreleaser.yml builds for. make test
// and this test build the snapshot for this machine's platform only
// (`hack/release-snapshot.sh --host-only`): a release has either all of them
// or, built for the tests, the host's alone.
var releasePlatforms = []string{"darwin_amd64", "darwin_arm64", "linux_amd64", "linux_arm64", "windows_amd64", "windows_arm64"}

// The provider installed as users install a release: goreleaser builds the
// snapshot release of this checkout from .goreleaser.yml, and each CLI runs a
// plain `init` (no dev_overrides) against a filesystem mirror and against a
// network mirror served here over HTTPS, with the mirror as the only
// installation method and every other address behind a proxy that refuses
// all. init checks the zip against the lock file or the mirror's checksums
// and records them in .terraform.lock.hcl; a tampered zip fails init. The
// installed binary then applies and destroys a maintenance; the API server's
// audit log shows its version in the User-Agent, and its log at INFO level
// names the version.
func TestAccReleaseInstallsFromMirrors(t *testing.T) {
	rel := snapshotRelease(t)
	t.Run("artifacts", func(t *testing.T) { rel.checkLayout(t) })
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		t.Run("filesystem_mirror", func(t *testing.T) {
			mirror := t.TempDir()
			pkgDir := filepath.Join(mirror, filepath.FromSlash(releaseSource))
			if err := os.MkdirAll(pkgDir, 0o755); err != nil {
				t.Fatal(err)
			}
			host := rel.hostZip(t)
			if err := os.WriteFile(filepath.Join(pkgDir, host.name), host.content, 0o644); err != nil {
				t.Fatal(err)
			}
			tf := newMirrorRun(t, fmt.Sprintf(`provider_installation {
  filesystem_mirror {
    path    = %q
    include = [%q]
  }
}
`, mirror, releaseSource), nil)
			tf.writeConfig(t, rel.version)
			tf.mustRun(t, "init")
			// A filesystem mirror lists no checksums: init records the
			// package's own (h1:), which later inits check.
			tf.wantLocked(t, rel.version, host.h1)
			tf.applyAndDestroy(t, c, rel.version)

			// The mirror's zip changes; the lock file remembers the old one.
			if err := os.WriteFile(filepath.Join(pkgDir, host.name), tamper(t, host.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(filepath.Join(tf.dir, ".terraform")); err != nil {
				t.Fatal(err)
			}
			tf.wantInitFailure(t, "doesn't match any of the checksums previously recorded in the dependency lock file")
		})

		t.Run("network_mirror", func(t *testing.T) {
			m := startNetworkMirror(t, rel)
			tf := newMirrorRun(t, fmt.Sprintf(`provider_installation {
  network_mirror {
    url     = %q
    include = [%q]
  }
}
`, m.url, releaseSource), []string{"SSL_CERT_FILE=" + m.caFile})
			tf.writeConfig(t, rel.version)
			out := tf.mustRun(t, "init")
			host := rel.hostZip(t)
			// Both CLIs check the zip against the mirror's zh: checksum and
			// record the package's own (h1:). OpenTofu records the mirror's
			// zh: too; Terraform (v1.5.7) records only checksums it computed
			// or a registry signed.
			if !strings.Contains(out, "(verified checksum)") {
				t.Errorf("init did not say it verified the zip against the mirror's checksum")
			}
			locked := []string{host.h1}
			if filepath.Base(tf.cli) == "tofu" {
				locked = append(locked, "zh:"+host.sha256)
			}
			tf.wantLocked(t, rel.version, locked...)
			m.wantServed(t, "index.json", rel.version+".json", host.name)
			tf.applyAndDestroy(t, c, rel.version)

			// A fresh init from a mirror whose zip no longer matches the
			// checksum the mirror lists for it.
			m.serveZip(host.name, tamper(t, host.content))
			fresh := newMirrorRun(t, tf.cliConfig, []string{"SSL_CERT_FILE=" + m.caFile})
			fresh.writeConfig(t, rel.version)
			fresh.wantInitFailure(t, fmt.Sprintf("provider package doesn't match the expected checksum \"zh:%s\"", host.sha256))
		})
	})
}

// release is a goreleaser snapshot of this checkout.
type release struct {
	version string
	dist    string
	// sums is SHA256SUMS: file name to hex SHA-256.
	sums map[string]string
	// platforms are those SHA256SUMS lists a zip for (os_arch), sorted.
	platforms []string
}

type releaseZip struct {
	name string
	// sha256 is the zip's (the CLIs' zh: hash); h1 is its contents' (h1:).
	sha256, h1 string
	content    []byte
}

// snapshotRelease is the release the test installs: the artifacts in
// $NM_RELEASE_DIST (make test builds them into dist/ first, with `make
// release-snapshot RELEASE_HOST_ONLY=1`), or else a snapshot of this
// machine's platform built by the same script into a scratch directory,
// removed after the test. The CLIs here install the host's zip only.
func snapshotRelease(t *testing.T) *release {
	t.Helper()
	testcluster.Get(t) // skips without TF_ACC, as the rest of the test needs a cluster
	dist := os.Getenv("NM_RELEASE_DIST")
	if dist == "" {
		dist = filepath.Join(t.TempDir(), "dist")
		if err := buildSnapshot(dist, "--host-only"); err != nil {
			t.Fatal(err)
		}
	}
	rel, err := loadRelease(dist)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

func buildSnapshot(dist string, flags ...string) error {
	root, err := testcluster.RepoRoot()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "release-snapshot.sh"), append([]string{"--dist", dist}, flags...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GPG_FINGERPRINT=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("hack/release-snapshot.sh (make release-snapshot) failed after %s: %v\n%s", time.Since(start).Round(time.Second), err, out)
	}
	fmt.Fprintf(os.Stderr, "built the snapshot release in %s into %s\n", time.Since(start).Round(time.Second), dist)
	return nil
}

func loadRelease(dist string) (*release, error) {
	var meta struct {
		Version string `json:"version"`
	}
	b, err := os.ReadFile(filepath.Join(dist, "metadata.json"))
	if err == nil {
		err = json.Unmarshal(b, &meta)
	}
	if err != nil || meta.Version == "" {
		return nil, fmt.Errorf("no release in %s: its metadata.json names no version (%v); build one with `make release-snapshot`, or leave NM_RELEASE_DIST unset", dist, err)
	}
	rel := &release{version: meta.Version, dist: dist, sums: map[string]string{}}
	sumsFile := filepath.Join(dist, fmt.Sprintf("%s_%s_SHA256SUMS", releaseProject, rel.version))
	f, err := os.Open(sumsFile)
	if err != nil {
		return nil, fmt.Errorf("the release has no checksum file: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		sum, name, ok := strings.Cut(s.Text(), "  ")
		if !ok {
			return nil, fmt.Errorf("%s: line %q is not \"<sha256>  <file>\"", sumsFile, s.Text())
		}
		rel.sums[name] = sum
		zipPrefix := fmt.Sprintf("%s_%s_", releaseProject, rel.version)
		if p, ok := strings.CutPrefix(name, zipPrefix); ok && strings.HasSuffix(p, ".zip") {
			rel.platforms = append(rel.platforms, strings.TrimSuffix(p, ".zip"))
		}
	}
	sort.Strings(rel.platforms)
	return rel, s.Err()
}

func (r *release) zipName(platform string) string {
	return fmt.Sprintf("%s_%s_%s.zip", releaseProject, r.version, platform)
}

// hostZip is the zip for the platform the CLIs run on.
func (r *release) hostZip(t *testing.T) releaseZip {
	t.Helper()
	name := r.zipName(runtime.GOOS + "_" + runtime.GOARCH)
	content, err := os.ReadFile(filepath.Join(r.dist, name))
	if err != nil {
		t.Fatalf("the release has no zip for this machine: %v", err)
	}
	sum := sha256.Sum256(content)
	// h1: is dirhash's Hash1 of the files in the zip, as both CLIs compute it.
	h1, err := dirhash.HashZip(filepath.Join(r.dist, name), dirhash.Hash1)
	if err != nil {
		t.Fatal(err)
	}
	return releaseZip{name: name, sha256: hex.EncodeToString(sum[:]), h1: h1, content: content}
}

// checkLayout checks what the registry and the mirrors need: a zip per
// platform holding the binary terraform-provider-nodemaintenance_v<version>
// at its top, the manifest announcing protocol 6, the extra files of
// .goreleaser.yml (the manifest, the operator's installation YAML and the
// monitoring files) listed in SHA256SUMS, and every file SHA256SUMS lists
// in the release with that checksum (what `sha256sum -c` checks for a user).
func (r *release) checkLayout(t *testing.T) {
	if !regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`).MatchString(r.version) {
		t.Errorf("the snapshot's version %q is not a semantic version without build metadata: the CLIs cannot pin it", r.version)
	}
	host := runtime.GOOS + "_" + runtime.GOARCH
	if !slices.Equal(r.platforms, releasePlatforms) && !slices.Equal(r.platforms, []string{host}) {
		t.Errorf("the release has zips for %v; want every platform of .goreleaser.yml %v, or %s alone (--host-only)", r.platforms, releasePlatforms, host)
	}
	for _, p := range r.platforms {
		r.checkZip(t, p)
	}
	manifest := fmt.Sprintf("%s_%s_manifest.json", releaseProject, r.version)
	for _, name := range []string{manifest, config.ManifestFile,
		fmt.Sprintf("%s_%s_prometheus-rules.yaml", releaseProject, r.version), fmt.Sprintf("%s_%s_grafana-dashboard.json", releaseProject, r.version)} {
		if _, ok := r.sums[name]; !ok {
			t.Errorf("SHA256SUMS has no line for %s, an extra file of .goreleaser.yml", name)
		}
	}
	for name, sum := range r.sums {
		b, err := os.ReadFile(filepath.Join(r.dist, name))
		if err != nil {
			t.Errorf("SHA256SUMS lists %s, which the release lacks: %v", name, err)
			continue
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != sum {
			t.Errorf("SHA256SUMS says %s for %s; its content hashes to %x", sum, name, got)
		}
		if name == manifest {
			checkManifest(t, b)
		}
	}
}

// checkZip checks that the platform's zip holds the executable the CLIs look
// for at its top.
func (r *release) checkZip(t *testing.T, platform string) {
	t.Helper()
	name := r.zipName(platform)
	binary := fmt.Sprintf("%s_v%s", releaseProject, r.version)
	if strings.HasPrefix(platform, "windows_") {
		binary += ".exe"
	}
	zr, err := zip.OpenReader(filepath.Join(r.dist, name))
	if err != nil {
		t.Errorf("zip for %s: %v", platform, err)
		return
	}
	defer zr.Close()
	var names []string
	for _, f := range zr.File {
		if f.Name == binary && f.Mode()&0o111 != 0 {
			return
		}
		names = append(names, f.Name)
	}
	t.Errorf("%s holds %v, want the executable %s at its top", name, names, binary)
}

// checkManifest checks the release's registry manifest: the checkout's
// terraform-registry-manifest.json, announcing protocol 6.
func checkManifest(t *testing.T, b []byte) {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if src, err := os.ReadFile(filepath.Join(root, "terraform-registry-manifest.json")); err != nil || !bytes.Equal(src, b) {
		t.Errorf("the release's manifest is not terraform-registry-manifest.json of the checkout (%v)", err)
	}
	var m struct {
		Version  int `json:"version"`
		Metadata struct {
			ProtocolVersions []string `json:"protocol_versions"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Version != 1 || len(m.Metadata.ProtocolVersions) != 1 || m.Metadata.ProtocolVersions[0] != "6.0" {
		t.Errorf("terraform-registry-manifest.json must say version 1, protocol_versions [\"6.0\"]; it holds %s (%v)", b, err)
	}
}

// tamper returns the zip with one byte of the provider binary changed: still
// a valid zip, with a binary of the same name and size.
func tamper(t *testing.T, content []byte) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(content), int64(len(content)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(f.Name, releaseProject) {
			b[len(b)-1] ^= 0xff
		}
		hdr := f.FileHeader
		w, err := zw.CreateHeader(&hdr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// mirrorRun is a CLI working directory whose only way to install providers is
// the given provider_installation block.
type mirrorRun struct {
	*cliRun
	cliConfig string
	logFile   string
}

func newMirrorRun(t *testing.T, cliConfig string, extraEnv []string) *mirrorRun {
	t.Helper()
	scratch := t.TempDir()
	rc := filepath.Join(scratch, "cli.tfrc")
	if err := os.WriteFile(rc, []byte(cliConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(scratch, "work")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	proxy := refuseOutsideTraffic(t)
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "TF_") && name != "TF_ACC", strings.HasPrefix(strings.ToUpper(name), "HTTP"),
			strings.EqualFold(name, "NO_PROXY"), strings.HasPrefix(name, "SSL_CERT_"):
			continue // settings of the caller that would change where the CLI installs from
		}
		env = append(env, kv)
	}
	logFile := filepath.Join(scratch, "provider.log")
	env = append(env, "TF_CLI_CONFIG_FILE="+rc, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1",
		"HTTPS_PROXY="+proxy, "HTTP_PROXY="+proxy, "https_proxy="+proxy, "http_proxy="+proxy)
	env = append(env, extraEnv...)
	return &mirrorRun{cliRun: &cliRun{cli: os.Getenv("TF_ACC_TERRAFORM_PATH"), dir: dir, env: env}, cliConfig: cliConfig, logFile: logFile}
}

// refuseOutsideTraffic returns a proxy URL for HTTPS_PROXY that answers
// nobody and fails the test if any connection reaches it. Go's HTTP clients
// (both CLIs, the provider) send every address but loopback through it: a
// CLI that looked for the provider anywhere but the mirror would be caught.
func refuseOutsideTraffic(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var attempts []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
			line, _ := bufio.NewReader(conn).ReadString('\n')
			conn.Close()
			mu.Lock()
			attempts = append(attempts, strings.TrimSpace(line))
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		if len(attempts) > 0 {
			t.Errorf("the CLI or the provider tried to reach beyond this machine through the proxy: %q", attempts)
		}
	})
	return "http://" + l.Addr().String()
}

// writeConfig pins exactly the release's version of the provider, as a
// prerelease version must be: constraints like ">= 0.1" never select one.
func (r *mirrorRun) writeConfig(t *testing.T, version string) {
	t.Helper()
	cfg := fmt.Sprintf(`terraform {
  required_providers {
    nodemaintenance = {
      source  = %q
      version = %q
    }
  }
}
`, releaseSource, version)
	if err := os.WriteFile(filepath.Join(r.dir, "versions.tf"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// wantLocked checks .terraform.lock.hcl: the provider at exactly version,
// with every one of hashes.
func (r *mirrorRun) wantLocked(t *testing.T, version string, hashes ...string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, ".terraform.lock.hcl"))
	if err != nil {
		t.Fatalf("init wrote no lock file: %v", err)
	}
	lock := string(b)
	want := []string{fmt.Sprintf("provider %q {", releaseSource), fmt.Sprintf("version     = %q", version)}
	for _, h := range hashes {
		want = append(want, fmt.Sprintf("%q", h))
	}
	for _, w := range want {
		if !strings.Contains(lock, w) {
			t.Errorf(".terraform.lock.hcl lacks %s:\n%s", w, lock)
		}
	}
}

func (r *mirrorRun) wantInitFailure(t *testing.T, want string) {
	t.Helper()
	out, err := r.run(t, "init")
	if err == nil {
		t.Fatalf("init of a tampered provider zip succeeded; want an error containing %q", want)
	}
	if flat := strings.Join(strings.Fields(out), " "); !strings.Contains(flat, want) {
		t.Errorf("init failed, but not with the checksum error %q:\n%s", want, out)
	}
}

// applyAndDestroy runs a maintenance of a fake node with the installed
// provider, as a ServiceAccount whose requests the audit log records, and
// checks the node is drained, then restored.
func (r *mirrorRun) applyAndDestroy(t *testing.T, c *testcluster.Cluster, version string) {
	t.Helper()
	installed := filepath.Join(r.dir, ".terraform", "providers", filepath.FromSlash(releaseSource), version,
		runtime.GOOS+"_"+runtime.GOARCH, fmt.Sprintf("%s_v%s", releaseProject, version))
	if _, err := os.Stat(installed); err != nil {
		t.Fatalf("init did not install the release's binary where the CLI runs it from: %v", err)
	}
	ns := c.Namespace(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "").Name
	c.CreateDeployment(t, ns, "web", 2, pool.Selector())
	c.WaitRunningPods(t, ns, "web", node, 2)
	pool.AddNode(t, "") // where the evicted pods go
	sa, token := maintainerToken(t, c, ns)
	creds := newTestCredentials(t, c)
	main := fmt.Sprintf(`provider "nodemaintenance" {
  %s
  token = %q
}

resource "nodemaintenance" "this" {
  node_name = %q
  reason    = "installed from a release mirror"
}
`, creds.server, token, node)
	if err := os.WriteFile(filepath.Join(r.dir, "main.tf"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	destroyed := false
	t.Cleanup(func() {
		if !destroyed {
			_, _ = r.run(t, "destroy", "-auto-approve")
		}
	})
	// The provider's log of the apply, at INFO level.
	base := r.env
	r.env = append(append([]string(nil), base...), "TF_LOG_PROVIDER=INFO", "TF_LOG_PATH="+r.logFile)
	r.mustRun(t, "apply", "-auto-approve")
	r.env = base
	nm := &nmv1beta1.NodeMaintenance{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Name: "maintain-" + node}, nm); err != nil {
		t.Fatalf("apply left no NodeMaintenance for node %s: %v", node, err)
	}
	if nm.Status.Phase != nmv1beta1.MaintenanceSucceeded {
		t.Errorf("NodeMaintenance %s is %q after apply, want Succeeded", nm.Name, nm.Status.Phase)
	}
	if err := cordoned(mustNode(c, node)); err != nil {
		t.Error(err)
	}
	wantUserAgent(t, c, sa, userAgentPrefix+version)
	wantVersionLogged(t, r.logFile, version)

	r.mustRun(t, "destroy", "-auto-approve")
	destroyed = true
	if err := schedulable(mustNode(c, node)); err != nil {
		t.Error(err)
	}
	err := c.Client.Get(context.Background(), client.ObjectKey{Name: nm.Name}, &nmv1beta1.NodeMaintenance{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("NodeMaintenance %s is left after destroy (get: %v)", nm.Name, err)
	}
}

// maintainerToken creates a ServiceAccount allowed what the provider
// documents it needs (nodemaintenances only) and returns its username and a
// token.
func maintainerToken(t *testing.T, c *testcluster.Cluster, ns string) (username, token string) {
	t.Helper()
	ctx := context.Background()
	name := testcluster.UniqueName(t, "maintainer")
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metaNamespaced(ns, name)},
		&rbacv1.ClusterRole{ObjectMeta: metaName(name), Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{nmv1beta1.GroupVersion.Group}, Resources: []string{"nodemaintenances"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metaName(name),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}},
	}
	for _, o := range objs {
		if err := c.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Client.Delete(context.Background(), o) })
	}
	tr, err := c.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return "system:serviceaccount:" + ns + ":" + name, tr.Status.Token
}

// wantUserAgent checks in the audit log that the ServiceAccount created the
// NodeMaintenance and that each of its requests carried want as User-Agent.
func wantUserAgent(t *testing.T, c *testcluster.Cluster, username, want string) {
	t.Helper()
	var created bool
	var others []string
	testcluster.WaitFor(t, 30*time.Second, "the audit log to show "+username+" creating a NodeMaintenance", func(ctx context.Context) (bool, error) {
		events, err := c.AuditEvents(ctx)
		if err != nil {
			return false, err
		}
		created, others = false, nil
		for _, e := range events {
			if e.User.Username != username {
				continue
			}
			if e.UserAgent != want {
				others = append(others, fmt.Sprintf("%s %s: %q", e.Verb, e.ObjectRef.Resource, e.UserAgent))
			}
			created = created || e.Verb == "create" && e.ObjectRef.Resource == "nodemaintenances"
		}
		return created, nil
	})
	if len(others) > 0 {
		t.Errorf("requests of the provider (%s) with another User-Agent than %q: %v", username, want, others)
	}
}

// wantVersionLogged checks that the provider said which version it is in
// its log (TF_LOG_PROVIDER=INFO).
func wantVersionLogged(t *testing.T, logFile, version string) {
	t.Helper()
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatalf("no provider log: %v", err)
	}
	want := fmt.Sprintf("%s %s configured", releaseProject, version)
	if !strings.Contains(string(b), want) {
		t.Errorf("the provider's log (%s) never says %q", logFile, want)
	}
}

// networkMirror serves the release by the Provider Network Mirror Protocol
// over HTTPS on loopback, with a certificate of its own CA (SSL_CERT_FILE).
type networkMirror struct {
	url, caFile string
	rel         *release

	mu     sync.Mutex
	zips   map[string][]byte
	served []string
}

func startNetworkMirror(t *testing.T, rel *release) *networkMirror {
	t.Helper()
	certDir := t.TempDir()
	caPEM, err := webhook.WriteSelfSignedCerts(certDir, []string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	m := &networkMirror{caFile: filepath.Join(certDir, "ca.crt"), rel: rel, zips: map[string][]byte{}}
	if err := os.WriteFile(m.caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range rel.platforms {
		name := rel.zipName(p)
		b, err := os.ReadFile(filepath.Join(rel.dist, name))
		if err != nil {
			t.Fatal(err)
		}
		m.zips[name] = b
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	m.url = fmt.Sprintf("https://%s/providers/", l.Addr())
	return m
}

func (m *networkMirror) serveZip(name string, content []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.zips[name] = content
}

// ServeHTTP answers the protocol's two documents under
// /providers/<hostname>/<namespace>/<type>/ and the zips they point at.
func (m *networkMirror) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := "/providers/" + releaseSource + "/"
	file, ok := strings.CutPrefix(req.URL.Path, prefix)
	if !ok || req.Method != http.MethodGet {
		http.NotFound(w, req)
		return
	}
	m.served = append(m.served, file)
	switch {
	case file == "index.json":
		writeJSON(w, map[string]any{"versions": map[string]any{m.rel.version: map[string]any{}}})
	case file == m.rel.version+".json":
		archives := map[string]any{}
		for _, p := range m.rel.platforms {
			name := m.rel.zipName(p)
			// The checksums come from the release's SHA256SUMS; the URL is
			// relative to this document.
			archives[p] = map[string]any{"url": name, "hashes": []string{"zh:" + m.rel.sums[name]}}
		}
		writeJSON(w, map[string]any{"archives": archives})
	default:
		b, ok := m.zips[file]
		if !ok {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("Content-Type", "application/zip")
		_, _ = w.Write(b)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// wantServed checks that the CLI fetched each file from the mirror.
func (m *networkMirror) wantServed(t *testing.T, files ...string) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range files {
		found := false
		for _, s := range m.served {
			found = found || s == f
		}
		if !found {
			t.Errorf("the CLI never fetched %s from the network mirror (it fetched %v)", f, m.served)
		}
	}
}
