package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	binaryName = "node-maintenance-operator"
	mainPkg    = "./operator/cmd/node-maintenance-operator"
	// user is what config/operator.go's Deployment runs the container as
	// (runAsUser, fsGroup): numeric, so that runAsNonRoot can check it
	// without an /etc/passwd in the image.
	user = "65532:65532"
)

// source is what the image is built from: the commit, and its time, which
// stands for every timestamp in the image so that a rebuild of the same
// commit gives the same bytes.
type source struct {
	revision string // empty outside a git checkout
	modified bool   // the working tree differs from the commit
	created  time.Time
}

func readSource(repo string) (source, error) {
	var s source
	if _, err := exec.LookPath("git"); err == nil {
		if rev, err := output(repo, "git", "rev-parse", "HEAD"); err == nil {
			s.revision = rev
			ct, err := output(repo, "git", "log", "-1", "--format=%ct", "HEAD")
			if err != nil {
				return s, err
			}
			sec, err := strconv.ParseInt(ct, 10, 64)
			if err != nil {
				return s, fmt.Errorf("commit time %q: %w", ct, err)
			}
			s.created = time.Unix(sec, 0).UTC()
			// Untracked files count too, as they do for Go's vcs.modified.
			st, err := output(repo, "git", "status", "--porcelain")
			if err != nil {
				return s, err
			}
			s.modified = st != ""
		}
	}
	// The reproducible-builds convention: a packager without git (a source
	// tarball) sets the time itself.
	if e := os.Getenv("SOURCE_DATE_EPOCH"); e != "" {
		sec, err := strconv.ParseInt(e, 10, 64)
		if err != nil {
			return s, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", e, err)
		}
		s.created = time.Unix(sec, 0).UTC()
	}
	if s.revision == "" && s.created.IsZero() {
		fmt.Fprintln(os.Stderr, "image: no git checkout and no SOURCE_DATE_EPOCH: the image is dated 1970-01-01 and has no revision")
		s.created = time.Unix(0, 0).UTC()
	}
	return s, nil
}

// build writes the image of o.repo's working tree into o.out and returns the
// digest of its index.
func build(o options) (string, error) {
	src, err := readSource(o.repo)
	if err != nil {
		return "", err
	}
	if src.modified {
		fmt.Fprintf(os.Stderr, "image: the working tree has changes not in %.12s: the binary says vcs.modified=true, and another build may differ\n", src.revision)
	}
	if err := os.RemoveAll(o.out); err != nil {
		return "", err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return "", err
	}

	labels := map[string]string{
		"org.opencontainers.image.source":  o.source,
		"org.opencontainers.image.version": o.version,
		"org.opencontainers.image.created": src.created.Format(time.RFC3339),
		"org.opencontainers.image.title":   binaryName,
	}
	if src.revision != "" {
		labels["org.opencontainers.image.revision"] = src.revision
	}

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	images := map[platform]v1.Image{}
	for _, p := range o.platforms {
		bin, err := compile(o, src, p)
		if err != nil {
			return "", err
		}
		img, err := imageOf(bin, p, src.created, labels)
		if err != nil {
			return "", fmt.Errorf("%s image: %w", p, err)
		}
		images[p] = img
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: p.os, Architecture: p.arch, Variant: p.variant},
		}})
	}
	// Registries show an index's annotations where a single image shows
	// its labels: the same facts in both places.
	idx = mutate.Annotations(idx, labels).(v1.ImageIndex)
	digest, err := idx.Digest()
	if err != nil {
		return "", err
	}

	ociDir := filepath.Join(o.out, "oci")
	lp, err := layout.Write(ociDir, empty.Index)
	if err != nil {
		return "", err
	}
	ref, err := name.NewTag(o.ref)
	if err != nil {
		return "", fmt.Errorf("-image %s: %w", o.ref, err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		// The tag, as the image-spec has it (skopeo oci:DIR:TAG), and the
		// full name, which `ctr images import` takes.
		"org.opencontainers.image.ref.name": ref.TagStr(),
		"io.containerd.image.name":          ref.Name(),
	})); err != nil {
		return "", err
	}
	if err := tarDir(ociDir, filepath.Join(o.out, binaryName+".oci.tar"), src.created); err != nil {
		return "", err
	}
	if p, ok := o.hostPlatform(); ok {
		f := filepath.Join(o.out, binaryName+"-"+p.dir()+".docker.tar")
		if err := tarball.WriteToFile(f, ref, images[p]); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(filepath.Join(o.out, "index.digest"), []byte(digest.String()+"\n"), 0o644); err != nil {
		return "", err
	}
	return digest.String(), nil
}

// compile builds the operator for p into o.out/OS-ARCH/ and writes its Go
// build info (`go version -m`: module versions, VCS revision, build flags)
// next to it, the image's bill of materials.
func compile(o options, src source, p platform) (string, error) {
	dir := filepath.Join(o.out, p.dir())
	bin := filepath.Join(dir, binaryName)
	// -buildvcs=true makes the binary carry vcs.revision, vcs.time and
	// vcs.modified (the GNUmakefile turns it off for everything else); it
	// needs git, so without a checkout the revision is simply absent.
	buildvcs := "-buildvcs=" + strconv.FormatBool(src.revision != "")
	args := []string{"build", "-trimpath", buildvcs,
		"-ldflags", "-s -w -X main.version=" + o.version,
		"-o", bin, mainPkg}
	cmd := exec.Command("go", args...)
	cmd.Dir = o.repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.os, "GOARCH="+p.arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go %s (GOOS=%s GOARCH=%s): %w", strings.Join(args, " "), p.os, p.arch, err)
	}
	fmt.Fprintf(os.Stderr, "image: built %s for %s in %s\n", binaryName, p, time.Since(start).Round(100*time.Millisecond))
	// Run in the binary's directory so that the report names the file, not
	// the path it was built at: two builds then write the same report.
	info, err := output(dir, "go", "version", "-m", binaryName)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(bin+".buildinfo.txt", []byte(info+"\n"), 0o644); err != nil {
		return "", err
	}
	return bin, nil
}

// imageOf is a one-layer image: the binary at /, owned by root and
// executable by all, run as user.
func imageOf(bin string, p platform, created time.Time, labels map[string]string) (v1.Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: binaryName, Mode: 0o755, Size: int64(len(data)),
		ModTime: created, Format: tar.FormatUSTAR}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerTar := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, err
	}

	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created:   v1.Time{Time: created},
		CreatedBy: "make image: go build -trimpath " + mainPkg + " (CGO_ENABLED=0)",
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.os, p.arch, p.variant
	cf.Created = v1.Time{Time: created}
	cf.Config = v1.Config{
		User:       user,
		Entrypoint: []string{"/" + binaryName},
		WorkingDir: "/",
		Labels:     labels,
	}
	return mutate.ConfigFile(img, cf)
}

// tarDir archives dir with sorted entries, one timestamp and fixed owners
// and modes, so that the archive is as reproducible as its contents.
func tarDir(dir, file string, mtime time.Time) error {
	var paths []string
	if err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && path != dir {
			paths = append(paths, path)
		}
		return err
	}); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, path := range paths { // WalkDir walks in lexical order
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Format: tar.FormatUSTAR}
		if fi.IsDir() {
			h.Typeflag, h.Name, h.Mode = tar.TypeDir, h.Name+"/", 0o755
		} else {
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, fi.Size()
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.IsDir() {
			if err := copyFile(tw, path); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

func copyFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// output runs a command in dir and returns its trimmed standard output.
func output(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
