// Command image builds the node-maintenance-operator image without a
// container engine or a registry: it cross-compiles the operator with Go,
// puts the binary alone in one layer and writes a multi-platform OCI image
// (layout directory and archive) plus a docker-archive of the host's
// platform, byte for byte the same for the same commit. `make image` runs it;
// `make verify-image` runs it with -verify and -smoke.
//
// It is a module of its own so that go-containerregistry stays out of the
// provider's go.mod.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

func main() {
	var o options
	flag.StringVar(&o.repo, "repo", "", "Root of the checkout to build (default: the git top level of the working directory).")
	flag.StringVar(&o.out, "out", "", "Directory the image is written to, replaced whole (default: REPO/bin/image).")
	flag.StringVar(&o.ref, "image", "", "Image reference the archives are tagged with, e.g. ghcr.io/nodemaintenance/node-maintenance-operator:v0.1.0.")
	flag.StringVar(&o.version, "version", "", "Version stamped into the binary and the labels (default: the tag of -image).")
	flag.StringVar(&o.source, "source", "https://github.com/nodemaintenance/terraform-provider-nodemaintenance", "org.opencontainers.image.source label.")
	flag.StringVar(&o.commit, "commit", "", "Build this commit (e.g. HEAD, a tag) from a clean clone of -repo instead of the working tree, so that uncommitted changes cannot leak in.")
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "Comma-separated os/arch list of the image index.")
	verify := flag.Bool("verify", false, "Build twice into OUT/1 and OUT/2, fail unless every file is identical; then read the image from OUT/1's OCI layout and fail unless its index lists exactly -platforms and each binary is an ELF for its platform with the expected Go build info; with -smoke, also run the host platform's image.")
	smoke := flag.Bool("smoke", false, "After building, load the host-platform image into podman and run it (--version, and the user it runs as).")
	flag.Parse()

	digest, err := run(o, *platforms, *verify, *smoke)
	if err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
	// The last line is the digest of the image index, what a registry
	// serves for the pushed tag: scripts take it with `tail -n1`.
	fmt.Println(digest)
}

func run(o options, platforms string, verify, smoke bool) (string, error) {
	if err := o.complete(platforms); err != nil {
		return "", err
	}
	if o.commit != "" {
		clone, err := cloneCommit(o.repo, o.commit)
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(clone)
		o.repo = clone
	}
	build, dir := build, o.out
	if verify {
		build, dir = verifyReproducible, filepath.Join(o.out, "1")
	}
	digest, err := build(o)
	if err != nil {
		return "", err
	}
	if smoke {
		if err := smokeTest(o, dir); err != nil {
			return "", err
		}
	}
	return digest, nil
}

// cloneCommit checks rev out in a temporary clone that borrows repo's objects
// (git clone --shared writes nothing into repo). The clone is a git checkout
// too, so the binary still records the revision, unmodified.
func cloneCommit(repo, rev string) (string, error) {
	sha, err := output(repo, "git", "rev-parse", "--verify", rev+"^{commit}")
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "image-src-")
	if err != nil {
		return "", err
	}
	if _, err := output(dir, "git", "clone", "--quiet", "--shared", "--no-checkout", repo, "."); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if _, err := output(dir, "git", "checkout", "--quiet", "--detach", sha); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	fmt.Fprintf(os.Stderr, "image: building commit %.12s from a clean clone\n", sha)
	return dir, nil
}

type options struct {
	repo, out, ref, version, source string
	commit                          string
	platforms                       []platform
}

type platform struct{ os, arch, variant string }

func (p platform) String() string { return p.os + "/" + p.arch }

// full is String with the variant, as an index's platform has it: linux/arm64/v8.
func (p platform) full() string {
	if p.variant == "" {
		return p.String()
	}
	return p.String() + "/" + p.variant
}

// dir names the per-platform files: linux-amd64.
func (p platform) dir() string { return p.os + "-" + p.arch }

func (o *options) complete(platforms string) error {
	if o.ref == "" {
		return fmt.Errorf("-image is required")
	}
	if o.repo == "" {
		top, err := output(".", "git", "rev-parse", "--show-toplevel")
		if err != nil {
			return fmt.Errorf("-repo not given and no git checkout here: %w", err)
		}
		o.repo = top
	}
	if o.out == "" {
		o.out = filepath.Join(o.repo, "bin", "image")
	}
	if o.version == "" {
		i := strings.LastIndex(o.ref, ":")
		if i < 0 || strings.Contains(o.ref[i:], "/") {
			return fmt.Errorf("-image %s has no tag: give one, or -version", o.ref)
		}
		o.version = o.ref[i+1:]
	}
	for _, s := range strings.Split(platforms, ",") {
		osName, arch, ok := strings.Cut(strings.TrimSpace(s), "/")
		if !ok || osName == "" || arch == "" {
			return fmt.Errorf("-platforms: %q is not os/arch", s)
		}
		p := platform{os: osName, arch: arch}
		if arch == "arm64" {
			// What registries and engines expect for 64-bit ARM.
			p.variant = "v8"
		}
		o.platforms = append(o.platforms, p)
	}
	return nil
}

// hostPlatform is the platform of the docker-archive: the one this machine
// runs, if the image has it.
func (o options) hostPlatform() (platform, bool) {
	for _, p := range o.platforms {
		if p.os == runtime.GOOS && p.arch == runtime.GOARCH {
			return p, true
		}
	}
	return platform{}, false
}
