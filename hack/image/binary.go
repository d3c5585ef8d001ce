package main

import (
	"debug/buildinfo"
	"debug/elf"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

const (
	mainModule = "github.com/nodemaintenance/terraform-provider-nodemaintenance"
	mainPath   = mainModule + "/operator/cmd/node-maintenance-operator"
)

// elfMachines is the ELF machine each image architecture's binary must be
// built for.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// goArchLevels is the Go build setting that fixes the instruction set of an
// architecture, and the value the image promises: amd64's baseline (any
// x86-64 node), arm64 v8.0 (the platform's variant v8).
var goArchLevels = map[string][2]string{"amd64": {"GOAMD64", "v1"}, "arm64": {"GOARM64", "v8.0"}}

// checkBinary checks that the operator binary r is what the image promises
// for p: a static 64-bit ELF for p's machine, whose Go build info has the
// operator's main package, p's GOOS and GOARCH, and src's revision.
func checkBinary(r io.ReaderAt, p platform, src source) error {
	f, err := elf.NewFile(r)
	if err != nil {
		return fmt.Errorf("not an ELF binary: %w", err)
	}
	problems := elfProblems(f, p)
	info, err := buildinfo.Read(r)
	if err != nil {
		problems = append(problems, fmt.Sprintf("no Go build info: %v", err))
	} else {
		problems = append(problems, buildInfoProblems(info, p, src)...)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// elfProblems checks the ELF header and program headers: 64-bit, p's
// machine, and no interpreter (a static binary: the image has no libc).
func elfProblems(f *elf.File, p platform) []string {
	var problems []string
	want, ok := elfMachines[p.arch]
	if !ok {
		return []string{fmt.Sprintf("no ELF machine known for architecture %q", p.arch)}
	}
	if f.Machine != want {
		problems = append(problems, fmt.Sprintf("ELF machine %s, want %s for %s", f.Machine, want, p))
	}
	if f.Class != elf.ELFCLASS64 {
		problems = append(problems, fmt.Sprintf("ELF class %s, want %s", f.Class, elf.ELFCLASS64))
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			problems = append(problems, "dynamically linked (it names an interpreter), want a static binary")
		}
	}
	return problems
}

// buildInfoProblems checks what `go version -m` shows against what compile
// builds: the operator's main package and module, this toolchain, the target
// platform and its instruction set, static (CGO_ENABLED=0), trimmed paths,
// and the revision when built from git (absent otherwise). Go leaves -ldflags
// out under -trimpath, so the stamped version is checked by running it.
func buildInfoProblems(info *debug.BuildInfo, p platform, src source) []string {
	var problems []string
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if info.Path != mainPath {
		problems = append(problems, fmt.Sprintf("main package %q, want %q", info.Path, mainPath))
	}
	if info.Main.Path != mainModule {
		problems = append(problems, fmt.Sprintf("main module %q, want %q", info.Main.Path, mainModule))
	}
	if info.GoVersion != runtime.Version() {
		problems = append(problems, fmt.Sprintf("built with %s, want this toolchain's %s", info.GoVersion, runtime.Version()))
	}
	want := map[string]string{"CGO_ENABLED": "0", "-trimpath": "true", "GOOS": p.os, "GOARCH": p.arch,
		"vcs.revision": src.revision}
	if level, ok := goArchLevels[p.arch]; ok {
		want[level[0]] = level[1]
	}
	if src.revision != "" {
		want["vcs"], want["vcs.modified"] = "git", strconv.FormatBool(src.modified)
	}
	for _, k := range sortedKeys(want) {
		if settings[k] != want[k] {
			problems = append(problems, fmt.Sprintf("%s=%q, want %q", k, settings[k], want[k]))
		}
	}
	if len(info.Deps) == 0 {
		problems = append(problems, "no module dependencies listed")
	}
	return problems
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
