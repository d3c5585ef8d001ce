package main

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// verifyReproducible builds the image twice, into OUT/1 and OUT/2, and fails
// unless both give the same index digest and the same bytes in every file,
// and each binary carries its Go build info. The second build finds the
// compiled packages in Go's build cache; what it proves is that the image
// assembly adds nothing of its own (times, order, owners) and that the link
// is deterministic. Go's compiler is reproducible by design.
func verifyReproducible(o options) (string, error) {
	var digests [2]string
	for i := range digests {
		oi := o
		oi.out = filepath.Join(o.out, fmt.Sprint(i+1))
		d, err := build(oi)
		if err != nil {
			return "", fmt.Errorf("build %d: %w", i+1, err)
		}
		digests[i] = d
		fmt.Fprintf(os.Stderr, "image: build %d: %s\n", i+1, d)
	}
	a, b := filepath.Join(o.out, "1"), filepath.Join(o.out, "2")
	if err := sameTree(a, b); err != nil {
		return "", fmt.Errorf("two builds differ: %w", err)
	}
	if digests[0] != digests[1] {
		return "", fmt.Errorf("two builds differ: index %s and %s", digests[0], digests[1])
	}
	src, err := readSource(o.repo)
	if err != nil {
		return "", err
	}
	for _, p := range o.platforms {
		if err := checkBuildInfo(filepath.Join(a, p.dir(), binaryName), p, src.revision); err != nil {
			return "", err
		}
	}
	// Go leaves -ldflags out of the build info under -trimpath (they may
	// hold paths), so the stamped version is checked by running the binary.
	if p, ok := o.hostPlatform(); ok {
		out, err := output(a, filepath.Join(a, p.dir(), binaryName), "--version")
		if err != nil {
			return "", err
		}
		if want := binaryName + " " + o.version + " " + src.revision; !strings.HasPrefix(out, want) {
			return "", fmt.Errorf("%s --version printed %q, want %q", binaryName, out, want)
		}
	}
	fmt.Fprintf(os.Stderr, "image: reproducible: two builds, same bytes; build info in every binary\n")
	return digests[0], nil
}

// sameTree fails on the first path that is in one tree only or differs.
func sameTree(a, b string) error {
	list := func(root string) (map[string][]byte, error) {
		files := map[string][]byte{}
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			files[rel], err = os.ReadFile(path)
			return err
		})
		return files, err
	}
	fa, err := list(a)
	if err != nil {
		return err
	}
	fb, err := list(b)
	if err != nil {
		return err
	}
	for rel, data := range fa {
		other, ok := fb[rel]
		if !ok {
			return fmt.Errorf("%s only in %s", rel, a)
		}
		if !bytes.Equal(data, other) {
			return fmt.Errorf("%s differs (cmp %s %s)", rel, filepath.Join(a, rel), filepath.Join(b, rel))
		}
	}
	for rel := range fb {
		if _, ok := fa[rel]; !ok {
			return fmt.Errorf("%s only in %s", rel, b)
		}
	}
	return nil
}

// checkBuildInfo reads what `go version -m` shows and checks the build
// settings the image promises: the operator's main package, static, trimmed
// paths, the target platform, and the revision when built from git (empty
// otherwise).
func checkBuildInfo(bin string, p platform, revision string) error {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("%s has no Go build info: %w", bin, err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	var problems []string
	if want := "github.com/nodemaintenance/terraform-provider-nodemaintenance/operator/cmd/node-maintenance-operator"; info.Path != want {
		problems = append(problems, fmt.Sprintf("path %q, want %q", info.Path, want))
	}
	for k, want := range map[string]string{"CGO_ENABLED": "0", "-trimpath": "true", "GOOS": p.os, "GOARCH": p.arch} {
		if settings[k] != want {
			problems = append(problems, fmt.Sprintf("%s=%q, want %q", k, settings[k], want))
		}
	}
	if settings["vcs.revision"] != revision {
		problems = append(problems, fmt.Sprintf("vcs.revision=%q, want %q", settings["vcs.revision"], revision))
	}
	if len(info.Deps) == 0 {
		problems = append(problems, "no module dependencies listed")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s build info: %s", bin, strings.Join(problems, "; "))
	}
	return nil
}
