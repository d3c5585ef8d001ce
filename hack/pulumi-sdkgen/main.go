// Command pulumi-sdkgen generates the Go, TypeScript (Node.js) and Python
// SDKs of a Pulumi package from its schema, one directory per language:
//
//	pulumi-sdkgen -version 0.1.0-dev -schema schema.json -out sdk
//
// Run it through `make pulumi-sdks`, which generates pulumi/sdk/{go,nodejs,python}
// from pulumi/cmd/pulumi-resource-nodemaintenance/schema.json. The committed
// schema has no version (so it does not change with releases); -version gives
// the SDKs theirs, the version of the provider plugin they ask the engine for.
//
// It calls Pulumi's code generators (github.com/pulumi/pulumi/pkg/v3/codegen/...)
// in process, the ones `pulumi package gen-sdk` reaches through a language
// plugin for each language; those plugins cannot be built on a machine without
// the internet (the Go language host is not on the module proxy, the Node.js one
// needs npm packages to build), the code generators can. They are those of the
// pinned Pulumi CLI: the older ones the bridge is built with (pulumi/go.mod)
// write wrong relative imports in nested TypeScript modules when built with
// Go 1.26, whose filepath.Rel cleans its result.
//
// Each language's directory is regenerated whole: every file in it goes,
// except the hand-maintained ones named in keep (go.mod and go.sum of the Go
// SDK's own module, package-lock.json of the Node.js SDK, which
// hack/pulumi-ts-check.sh installs from) and what builds leave there
// (node_modules and bin of the Node.js SDK, which its .gitignore hides).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/blang/semver"
	gogen "github.com/pulumi/pulumi/pkg/v3/codegen/go"
	nodejsgen "github.com/pulumi/pulumi/pkg/v3/codegen/nodejs"
	pythongen "github.com/pulumi/pulumi/pkg/v3/codegen/python"
	pschema "github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

// tool is the generator's name in the "do not edit" header of every file.
const tool = "pulumi-sdkgen"

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
			return nodejsgen.GeneratePackage(tool, pkg, nil, nil, false, selfContained{})
		},
		keep: []string{"node_modules", "bin", "package-lock.json"},
	},
	{
		name: "python",
		generate: func(pkg *pschema.Package) (map[string][]byte, error) {
			return pythongen.GeneratePackage(tool, pkg, nil, selfContained{})
		},
	},
}

func main() {
	schemaPath := flag.String("schema", "", "the Pulumi package schema (required; `make pulumi-generate` writes it)")
	out := flag.String("out", "", "the directory that gets one subdirectory per language (required)")
	version := flag.String("version", "", "the version of the SDKs and of the provider plugin they use (required; `make pulumi-sdks` passes PULUMI_PROVIDER_VERSION)")
	flag.Parse()
	if *version == "" || *schemaPath == "" || *out == "" || flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "usage: %s -version X.Y.Z -schema FILE -out DIR\n", tool)
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
		return fmt.Errorf("read the package schema: %w", err)
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
	pkg, diags, err := pschema.BindSpec(spec, selfContained{}, pschema.ValidationOptions{})
	if err != nil {
		return nil, err
	}
	if diags.HasErrors() {
		return nil, fmt.Errorf("invalid package schema: %w", diags)
	}
	return pkg, nil
}

// selfContained is the schema loader of a package that refers to no other
// package (nodemaintenance's types are all its own): asked for one, it says so
// instead of looking for a plugin.
type selfContained struct{}

var _ pschema.ReferenceLoader = selfContained{}

func (selfContained) refused(name string) error {
	return fmt.Errorf("the schema refers to the package %q, and %s loads no package but the one it generates", name, tool)
}

func (l selfContained) LoadPackage(name string, _ *semver.Version) (*pschema.Package, error) {
	return nil, l.refused(name)
}

func (l selfContained) LoadPackageV2(_ context.Context, d *pschema.PackageDescriptor) (*pschema.Package, error) {
	return nil, l.refused(d.Name)
}

func (l selfContained) LoadPackageReference(name string, _ *semver.Version) (pschema.PackageReference, error) {
	return nil, l.refused(name)
}

func (l selfContained) LoadPackageReferenceV2(_ context.Context, d *pschema.PackageDescriptor) (pschema.PackageReference, error) {
	return nil, l.refused(d.Name)
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
