package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
)

// Two runs of the generator write the same bytes.
func TestTwoRunsWriteTheSameFiles(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b} {
		if err := run(dir); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{config.ManifestFile, "kustomization.yaml"} {
		first, err := os.ReadFile(filepath.Join(a, name))
		if err != nil {
			t.Fatal(err)
		}
		second, err := os.ReadFile(filepath.Join(b, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(first) == 0 || !bytes.Equal(first, second) {
			t.Errorf("%s: two runs wrote different (or no) bytes (%d and %d)", name, len(first), len(second))
		}
	}
}
