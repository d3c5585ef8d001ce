package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var (
	amd64 = platform{os: "linux", arch: "amd64"}
	arm64 = platform{os: "linux", arch: "arm64", variant: "v8"}
)

// goodBuildInfo is what compile stamps for p from a clean checkout of rev.
func goodBuildInfo(p platform, rev string) *debug.BuildInfo {
	settings := []debug.BuildSetting{{Key: "-buildmode", Value: "exe"}, {Key: "-compiler", Value: "gc"},
		{Key: "-trimpath", Value: "true"}, {Key: "CGO_ENABLED", Value: "0"}, {Key: "GOARCH", Value: p.arch},
		{Key: "GOOS", Value: p.os}, {Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
		{Key: "vcs.modified", Value: "false"}}
	level := goArchLevels[p.arch]
	settings = append(settings, debug.BuildSetting{Key: level[0], Value: level[1]})
	return &debug.BuildInfo{GoVersion: runtime.Version(), Path: mainPath, Main: debug.Module{Path: mainModule, Version: "(devel)"},
		Deps: []*debug.Module{{Path: "sigs.k8s.io/controller-runtime", Version: "v0.25.3"}}, Settings: settings}
}

func TestBuildInfoProblems(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	clean := source{revision: rev}
	set := func(key, value string) func(*debug.BuildInfo) {
		return func(bi *debug.BuildInfo) {
			for i := range bi.Settings {
				if bi.Settings[i].Key == key {
					bi.Settings[i].Value = value
					return
				}
			}
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: key, Value: value})
		}
	}
	tests := []struct {
		name   string
		p      platform
		src    source
		change func(*debug.BuildInfo)
		want   string // a problem that must be reported; "" for none
	}{
		{name: "amd64 as built", p: amd64, src: clean},
		{name: "arm64 as built", p: arm64, src: clean},
		{name: "built for another arch", p: arm64, src: clean, change: set("GOARCH", "amd64"), want: `GOARCH="amd64", want "arm64"`},
		{name: "cgo", p: amd64, src: clean, change: set("CGO_ENABLED", "1"), want: `CGO_ENABLED="1", want "0"`},
		{name: "paths kept", p: amd64, src: clean, change: set("-trimpath", ""), want: `-trimpath="", want "true"`},
		{name: "amd64 v3 only", p: amd64, src: clean, change: set("GOAMD64", "v3"), want: `GOAMD64="v3", want "v1"`},
		{name: "another commit", p: amd64, src: clean, change: set("vcs.revision", "feed"), want: `vcs.revision="feed"`},
		{name: "dirty tree", p: amd64, src: clean, change: set("vcs.modified", "true"), want: `vcs.modified="true", want "false"`},
		{name: "dirty tree expected", p: amd64, src: source{revision: rev, modified: true}, change: set("vcs.modified", "true")},
		{name: "another main", p: amd64, src: clean, change: func(bi *debug.BuildInfo) { bi.Path = mainModule }, want: "main package"},
		{name: "another toolchain", p: amd64, src: clean, change: func(bi *debug.BuildInfo) { bi.GoVersion = "go1.1" }, want: "built with go1.1"},
		{name: "no deps", p: amd64, src: clean, change: func(bi *debug.BuildInfo) { bi.Deps = nil }, want: "no module dependencies"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bi := goodBuildInfo(tt.p, rev)
			if tt.change != nil {
				tt.change(bi)
			}
			got := strings.Join(buildInfoProblems(bi, tt.p, tt.src), "; ")
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("problems %q, want %q", got, tt.want)
			}
		})
	}
}

// TestELFProblemsReadMachine runs on this test's own binary, an ELF for the
// machine it runs on.
func TestELFProblemsReadMachine(t *testing.T) {
	host := platform{os: runtime.GOOS, arch: runtime.GOARCH}
	other := arm64
	if _, ok := elfMachines[host.arch]; runtime.GOOS != "linux" || !ok {
		t.Skipf("reads an ELF binary of linux/amd64 or linux/arm64; this is %s", host)
	}
	if host.arch == "arm64" {
		other = amd64
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range elfProblems(f, host) {
		if strings.Contains(p, "machine") || strings.Contains(p, "class") {
			t.Errorf("the test binary for %s: %s", host, p)
		}
	}
	if got := strings.Join(elfProblems(f, other), "; "); !strings.Contains(got, "ELF machine "+elfMachines[host.arch].String()+", want "+elfMachines[other.arch].String()) {
		t.Errorf("checked as %s, the test binary gave %q, want a machine problem", other, got)
	}
}

func TestPlatformProblems(t *testing.T) {
	desc := func(p platform) v1.Descriptor {
		return v1.Descriptor{MediaType: types.OCIManifestSchema1, Platform: &v1.Platform{OS: p.os, Architecture: p.arch, Variant: p.variant}}
	}
	both := []platform{amd64, arm64}
	tests := []struct {
		name      string
		manifests []v1.Descriptor
		want      string
	}{
		{name: "both", manifests: []v1.Descriptor{desc(amd64), desc(arm64)}},
		{name: "host only", manifests: []v1.Descriptor{desc(amd64)}, want: "no image for linux/arm64/v8"},
		{name: "arm64 without variant", manifests: []v1.Descriptor{desc(amd64), desc(platform{os: "linux", arch: "arm64"})},
			want: "no image for linux/arm64/v8; an image for linux/arm64, which was not asked for"},
		{name: "twice", manifests: []v1.Descriptor{desc(amd64), desc(arm64), desc(arm64)}, want: "2 images for linux/arm64/v8"},
		{name: "no platform", manifests: []v1.Descriptor{desc(amd64), desc(arm64), {MediaType: types.OCIManifestSchema1}}, want: "names no platform"},
		{name: "docker manifest", manifests: []v1.Descriptor{desc(amd64), {MediaType: types.DockerManifestSchema2, Platform: desc(arm64).Platform}},
			want: "is a " + string(types.DockerManifestSchema2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(platformProblems(&v1.IndexManifest{Manifests: tt.manifests}, both), "; ")
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("problems %q, want %q", got, tt.want)
			}
		})
	}
}

func TestBinaryFromLayer(t *testing.T) {
	layer := func(name string, typ byte, mode int64) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		content := []byte("\x7fELF...")
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: typ, Mode: mode, Size: int64(len(content))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(content); err != nil {
			t.Fatal(err)
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	tests := []struct {
		name  string
		layer []byte
		want  string // error; "" for the binary
	}{
		{name: "as built", layer: layer(binaryName, tar.TypeReg, 0o755)},
		{name: "another file", layer: layer("manager", tar.TypeReg, 0o755), want: "holds [manager], not " + binaryName},
		{name: "not executable", layer: layer(binaryName, tar.TypeReg, 0o644), want: "not a regular file executable by all"},
		{name: "owner only", layer: layer(binaryName, tar.TypeReg, 0o700), want: "not a regular file executable by all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin, err := binaryFromLayer(bytes.NewReader(tt.layer))
			switch {
			case tt.want == "" && (err != nil || string(bin) != "\x7fELF..."):
				t.Errorf("got %q, %v; want the file's bytes", bin, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}
