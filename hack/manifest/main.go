// Command manifest writes the installation without Terraform into a
// directory (make manifests writes deploy/):
//
//	manifest DIR
//
// DIR receives node-maintenance-operator.yaml, every object that
// nodemaintenance_operator applies when every attribute is at its default
// (config.OperatorObjects(config.DefaultOperatorOptions())), and
// kustomization.yaml, a kustomize base that lists it. The same tree gives the
// same bytes.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: manifest DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "manifest: %v\n", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	objs, err := config.OperatorObjects(config.DefaultOperatorOptions())
	if err != nil {
		return fmt.Errorf("render the default installation: %w", err)
	}
	manifest, err := config.Manifest(objs)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, body := range map[string][]byte{config.ManifestFile: manifest, "kustomization.yaml": config.Kustomization()} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			return err
		}
	}
	return nil
}
