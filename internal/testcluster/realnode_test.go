package testcluster

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestBuildImageWritesADockerArchive(t *testing.T) {
	out := filepath.Join(t.TempDir(), "images.tar")
	if err := BuildImage("./internal/testcluster/waiter", out, WaiterImage, SandboxImage); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name], _ = io.ReadAll(tr)
	}
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v %s", err, files["manifest.json"])
	}
	m := manifest[0]
	if !slices.Equal(m.RepoTags, []string{WaiterImage, SandboxImage}) {
		t.Errorf("tags %v", m.RepoTags)
	}
	var config struct {
		Config struct{ Entrypoint []string }
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(files[m.Config], &config); err != nil {
		t.Fatalf("config %s: %v", m.Config, err)
	}
	if sum := sha256.Sum256(files[m.Config]); hex.EncodeToString(sum[:])+".json" != m.Config {
		t.Errorf("config %s is not named after its digest", m.Config)
	}
	if len(m.Layers) != 1 || len(config.RootFS.DiffIDs) != 1 {
		t.Fatalf("want one layer: %v, diff_ids %v", m.Layers, config.RootFS.DiffIDs)
	}
	layer := files[m.Layers[0]]
	if sum := sha256.Sum256(layer); "sha256:"+hex.EncodeToString(sum[:]) != config.RootFS.DiffIDs[0] {
		t.Errorf("diff_id %s does not match the layer", config.RootFS.DiffIDs[0])
	}
	lr := tar.NewReader(strings.NewReader(string(layer)))
	h, err := lr.Next()
	if err != nil || h.Name != "waiter" || h.Mode&0o111 == 0 {
		t.Fatalf("layer's file: %+v %v", h, err)
	}
	if !slices.Equal(config.Config.Entrypoint, []string{"/waiter"}) {
		t.Errorf("entrypoint %v", config.Config.Entrypoint)
	}
}

func TestUnescapeMountPath(t *testing.T) {
	for in, want := range map[string]string{
		"/tmp/a":             "/tmp/a",
		`/tmp/with\040space`: "/tmp/with space",
		`/tmp/tab\011x`:      "/tmp/tab\tx",
		`/tmp/trailing\`:     `/tmp/trailing\`,
	} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLocalEnvDropsEveryProxyVariable(t *testing.T) {
	for _, v := range proxyVars {
		t.Setenv(v, "http://127.0.0.1:9")
	}
	env := localEnv("EXTRA=1")
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(proxyVars, name) {
			t.Errorf("%s kept", name)
		}
	}
	if env[len(env)-1] != "EXTRA=1" {
		t.Errorf("extra variable missing: %v", env[len(env)-1])
	}
}
