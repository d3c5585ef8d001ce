package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// verifyReproducible builds the image twice, into OUT/1 and OUT/2, and fails
// unless both give the same index digest and the same bytes in every file;
// then it checks the image of OUT/1 from its OCI layout (verifyIndex): every
// platform asked for, each binary an ELF for its platform with the expected
// Go build info. The second build finds the
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
	if err := verifyIndex(filepath.Join(a, "oci"), o.platforms, src); err != nil {
		return "", err
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
	fmt.Fprintf(os.Stderr, "image: reproducible: two builds, same bytes; the index lists %s, each binary checked\n", platformList(o.platforms))
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

func platformList(ps []platform) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.full()
	}
	return strings.Join(s, ", ")
}
