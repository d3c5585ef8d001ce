package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// verifyIndex reads the image in the OCI layout ociDir as a node's runtime
// gets it (index.json, the image index it names, each platform's manifest,
// config and layer), and fails unless the index lists exactly the platforms
// want, each platform's config says that platform, and each binary in a
// layer is an ELF for its platform with the build info of src.
func verifyIndex(ociDir string, want []platform, src source) error {
	lp, err := layout.FromPath(ociDir)
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", ociDir, err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		return fmt.Errorf("%s/index.json: %w", ociDir, err)
	}
	topManifest, err := top.IndexManifest()
	if err != nil {
		return fmt.Errorf("%s/index.json: %w", ociDir, err)
	}
	if n := len(topManifest.Manifests); n != 1 || topManifest.Manifests[0].MediaType != types.OCIImageIndex {
		return fmt.Errorf("%s/index.json lists %d entries, want one: the image index", ociDir, n)
	}
	idx, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	if err != nil {
		return fmt.Errorf("image index: %w", err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		return fmt.Errorf("image index: %w", err)
	}
	if problems := platformProblems(manifest, want); len(problems) > 0 {
		return fmt.Errorf("image index %s: %s", topManifest.Manifests[0].Digest, strings.Join(problems, "; "))
	}
	for _, d := range manifest.Manifests {
		p := platform{os: d.Platform.OS, arch: d.Platform.Architecture, variant: d.Platform.Variant}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return fmt.Errorf("%s image: %w", p, err)
		}
		if err := checkImage(img, p, src); err != nil {
			return fmt.Errorf("%s image %s: %w", p, d.Digest, err)
		}
		fmt.Fprintf(os.Stderr, "image: %s: a static ELF for %s, built from %.12s with CGO_ENABLED=0 -trimpath\n",
			p, elfMachines[p.arch], src.revision)
	}
	return nil
}

// platformProblems compares the platforms an image index lists with want
// (variants included): each wanted one once, no other, each an OCI manifest.
func platformProblems(m *v1.IndexManifest, want []platform) []string {
	var problems []string
	seen := map[platform]int{}
	for _, d := range m.Manifests {
		if d.Platform == nil {
			problems = append(problems, fmt.Sprintf("manifest %s names no platform", d.Digest))
			continue
		}
		if d.MediaType != types.OCIManifestSchema1 {
			problems = append(problems, fmt.Sprintf("manifest %s is a %s, want %s", d.Digest, d.MediaType, types.OCIManifestSchema1))
		}
		seen[platform{os: d.Platform.OS, arch: d.Platform.Architecture, variant: d.Platform.Variant}]++
	}
	wanted := map[platform]bool{}
	for _, p := range want {
		wanted[p] = true
		switch seen[p] {
		case 0:
			problems = append(problems, fmt.Sprintf("no image for %s", p.full()))
		case 1:
		default:
			problems = append(problems, fmt.Sprintf("%d images for %s", seen[p], p.full()))
		}
	}
	for _, d := range m.Manifests {
		if d.Platform == nil {
			continue
		}
		if p := (platform{os: d.Platform.OS, arch: d.Platform.Architecture, variant: d.Platform.Variant}); !wanted[p] {
			problems = append(problems, fmt.Sprintf("an image for %s, which was not asked for", p.full()))
		}
	}
	return problems
}

// checkImage checks one platform's image: its config says p and runs the
// binary as user, and its one layer holds the binary checkBinary accepts.
func checkImage(img v1.Image, p platform, src source) error {
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	if got := (platform{os: cf.OS, arch: cf.Architecture, variant: cf.Variant}); got != p {
		return fmt.Errorf("config says platform %s, the index %s", got.full(), p.full())
	}
	if cf.Config.User != user || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/"+binaryName {
		return fmt.Errorf("config runs %v as %q, want [/%s] as %q", cf.Config.Entrypoint, cf.Config.User, binaryName, user)
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	if len(layers) != 1 {
		return fmt.Errorf("%d layers, want one (the binary)", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	bin, err := binaryFromLayer(rc)
	if err != nil {
		return err
	}
	if err := checkBinary(bytes.NewReader(bin), p, src); err != nil {
		return fmt.Errorf("/%s: %w", binaryName, err)
	}
	return nil
}

// binaryFromLayer returns the operator binary from an uncompressed layer: a
// regular file at the top, executable by all.
func binaryFromLayer(r io.Reader) ([]byte, error) {
	tr := tar.NewReader(r)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("the layer holds %v, not %s", names, binaryName)
		}
		if err != nil {
			return nil, fmt.Errorf("layer: %w", err)
		}
		if strings.TrimPrefix(h.Name, "/") != binaryName {
			names = append(names, h.Name)
			continue
		}
		if h.Typeflag != tar.TypeReg || h.Mode&0o111 != 0o111 {
			return nil, fmt.Errorf("the layer's %s is not a regular file executable by all (type %q, mode %o)", h.Name, h.Typeflag, h.Mode)
		}
		return io.ReadAll(tr)
	}
}
