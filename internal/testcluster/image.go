package testcluster

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// BuildImage builds a container image with no registry and no image tool: it
// compiles the Go command pkg of this module (a path relative to go.mod)
// statically and writes out, a `docker save` archive of one image FROM
// scratch whose only file and entrypoint is that binary, tagged with every
// tag. `ctr images import` loads it.
func BuildImage(pkg, out string, tags ...string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	binName := filepath.Base(pkg)
	tmp, err := os.MkdirTemp("", "nm-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, binName)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return err
	}

	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: binName, Mode: 0o755, Size: int64(len(binary)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(binary); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layerSum := sha256.Sum256(layer.Bytes())
	layerHex := hex.EncodeToString(layerSum[:])

	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": []string{"/" + binName}},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerHex}},
	})
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{
		"Config":   configName,
		"RepoTags": tags,
		"Layers":   []string{layerHex + "/layer.tar"},
	}})
	if err != nil {
		return err
	}

	f, err := os.Create(out)
	if err != nil {
		return err
	}
	archive := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{layerHex + "/layer.tar", layer.Bytes()}, {configName, config}, {"manifest.json", manifest}} {
		if err := archive.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg}); err != nil {
			f.Close()
			return err
		}
		if _, err := archive.Write(e.data); err != nil {
			f.Close()
			return err
		}
	}
	if err := archive.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
