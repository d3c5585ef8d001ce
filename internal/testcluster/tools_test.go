package testcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A missing pinned binary is an error that tells the user to run make tools;
// a binary on PATH is never a substitute.
func TestToolMissingSaysRunMakeTools(t *testing.T) {
	t.Setenv("NM_TOOLS_DIR", t.TempDir())
	t.Setenv("PATH", "/usr/bin:/bin")
	_, err := Tool("kubectl")
	if err == nil || !strings.Contains(err.Error(), "run `make tools`") {
		t.Fatalf("got %v", err)
	}
	if err := RequireTools("kwokctl", "etcd"); err == nil || !strings.Contains(err.Error(), "kwokctl") {
		t.Fatalf("RequireTools: %v", err)
	}
}

func TestToolFoundInVersionedCache(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("NM_TOOLS_DIR", dir)
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "kwokctl"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "kwok-stages.yaml"), []byte("---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RequireTools("kwokctl", "kwok-stages.yaml"); err != nil {
		t.Fatal(err)
	}
	if got := ToolsBinDir(); got != bin {
		t.Fatalf("ToolsBinDir = %s, want %s", got, bin)
	}
}
