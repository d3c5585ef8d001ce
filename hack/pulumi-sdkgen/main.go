// Command pulumi-sdkgen-nodemaintenance generates the Go, TypeScript (Node.js)
// and Python SDKs of the nodemaintenance Pulumi package from its committed
// schema:
//
//	pulumi-sdkgen-nodemaintenance -version 0.1.0-dev -schema cmd/pulumi-resource-nodemaintenance/schema.json -out sdk
//
// The committed schema has no version (so it does not change with releases);
// -version gives the SDKs theirs, the version of the provider plugin they ask
// the engine for.
//
// Run it through `make pulumi-sdks`. It calls Pulumi's code generators
// (github.com/pulumi/pulumi/pkg/v3/codegen/...) in process, which is what
// `pulumi package gen-sdk` does through a language plugin for each language;
// those plugins cannot be built on a machine without the internet (the Go
// language host is not on the module proxy and the Node.js one needs npm
// packages at build time), the code generators can.
//
// Each language's directory is regenerated whole: every file in it goes,
// except the hand-maintained ones named in keep (go.mod and go.sum of the Go
// SDK's own module) and what builds leave there (node_modules and bin of the
// Node.js SDK, which .gitignore hides).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	gogen "github.com/pulumi/pulumi/pkg/v3/codegen/go"
	nodejsgen "github.com/pulumi/pulumi/pkg/v3/codegen/nodejs"
	pythongen "github.com/pulumi/pulumi/pkg/v3/codegen/python"
	pschema "github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

// tool is the generator's name in the "do not edit" header of every file.
const tool = "pulumi-sdkgen-nodemaintenance"

type language struct {
	name     string
	generate func(*pschema.Package) (map[string][]byte, error)
	// keep lists the top-level entries of the language's directory that are
	// not generated and survive a regeneration.
	keep []string
}

var languages = []language{
	{
		name: "go",
		generate: func(pkg *pschema.Package) (map[string][]byte, error) {
			return gogen.GeneratePackage(tool, pkg, nil)
		},
		keep: []string{"go.mod", "go.sum"},
	},
	{
		name: "nodejs",
		generate: func(pkg *pschema.Package) (map[string][]byte, error) {
			return nodejsgen.GeneratePackage(tool, pkg, nil, nil, false, nil)
		},
		keep: []string{"node_modules", "bin"},
	},
	{
		name: "python",
		generate: func(pkg *pschema.Package) (map[string][]byte, error) {
			return pythongen.GeneratePackage(tool, pkg, nil, nil)
		},
	},
}

func main() {
	schemaPath := flag.String("schema", "cmd/pulumi-resource-nodemaintenance/schema.json", "the Pulumi package schema (written by `make pulumi-generate`)")
	out := flag.String("out", "sdk", "the directory that gets one subdirectory per language")
	version := flag.String("version", "", "the version of the SDKs and of the provider plugin they use (required; `make pulumi-sdks` passes PULUMI_PROVIDER_VERSION)")
	flag.Parse()
	if *version == "" || flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "usage: %s -version X.Y.Z [-schema FILE] [-out DIR]\n", tool)
		os.Exit(2)
	}
	if err := run(*schemaPath, *out, *version); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", tool, err)
		os.Exit(1)
	}
}

func run(schemaPath, out, version string) error {
	raw, err := os.ReadFile(schemaPath)
	if err != nil {
		return fmt.Errorf("read the package schema (run `make pulumi-generate` first): %w", err)
	}
	for _, lang := range languages {
		// Bound afresh for each language: the generators record their
		// language's options in the package they are given.
		pkg, err := bind(raw, version)
		if err != nil {
			return fmt.Errorf("%s: %w", schemaPath, err)
		}
		files, err := lang.generate(pkg)
		if err != nil {
			return fmt.Errorf("generate the %s SDK: %w", lang.name, err)
		}
		if err := replaceDir(filepath.Join(out, lang.name), files, lang.keep); err != nil {
			return fmt.Errorf("write the %s SDK: %w", lang.name, err)
		}
	}
	return nil
}

// bind parses and validates the schema as `pulumi package gen-sdk` does.
func bind(raw []byte, version string) (*pschema.Package, error) {
	var spec pschema.PackageSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("not a Pulumi package schema: %w", err)
	}
	spec.Version = version
	pkg, diags, err := pschema.BindSpec(spec, nil, pschema.ValidationOptions{})
	if err != nil {
		return nil, err
	}
	if diags.HasErrors() {
		return nil, fmt.Errorf("invalid package schema: %w", diags)
	}
	return pkg, nil
}

// replaceDir makes dir hold exactly files, plus the entries named in keep.
func replaceDir(dir string, files map[string][]byte, keep []string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		if slices.Contains(keep, e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}
