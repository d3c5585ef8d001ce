package testcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ToolsBinDir is where `make tools` (hack/tools.sh) links the pinned binaries.
// It follows the same rules as the script: $NM_TOOLS_DIR, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/terraform-provider-nodemaintenance/tools.
func ToolsBinDir() string {
	dir := os.Getenv("NM_TOOLS_DIR")
	if dir == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(cache, "terraform-provider-nodemaintenance", "tools")
	}
	return filepath.Join(dir, "bin")
}

// Tool returns the path of a binary built by `make tools`, or an error that
// tells the user how to build it. Binaries on PATH are never used.
func Tool(name string) (string, error) {
	path := filepath.Join(ToolsBinDir(), name)
	info, err := os.Stat(path)
	if err != nil || info.IsDir() || (info.Mode()&0o111 == 0 && filepath.Ext(name) == "") {
		return "", fmt.Errorf("the pinned %s binary is missing from %s: run `make tools` first (it builds the test toolchain from Go module source)", name, ToolsBinDir())
	}
	return path, nil
}

// RequireTools checks that every named binary was built.
func RequireTools(names ...string) error {
	for _, n := range names {
		if _, err := Tool(n); err != nil {
			return err
		}
	}
	return nil
}

// RepoRoot returns the directory holding go.mod, found from the working
// directory of the test (a package directory).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod not found above the working directory")
		}
		dir = parent
	}
}

func command(name string, args ...string) (*exec.Cmd, error) {
	path, err := Tool(name)
	if err != nil {
		return nil, err
	}
	return exec.Command(path, args...), nil
}

// Build builds a package of the module under test (a path relative to its
// go.mod, e.g. "." or "./operator/cmd/node-maintenance-operator") into out,
// as `go build -o out pkg` in the module root.
func Build(pkg, out string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// WriteDevOverrides writes a Terraform/OpenTofu CLI configuration to path
// that takes the nodemaintenance provider, under both registries' addresses,
// from the terraform-provider-nodemaintenance binary in providerDir (use it
// as TF_CLI_CONFIG_FILE; no init needed for the provider).
func WriteDevOverrides(path, providerDir string) error {
	return os.WriteFile(path, []byte(fmt.Sprintf(`provider_installation {
  dev_overrides {
    "registry.terraform.io/nodemaintenance/nodemaintenance" = %q
    "registry.opentofu.org/nodemaintenance/nodemaintenance" = %q
  }
  direct {}
}
`, providerDir, providerDir)), 0o644)
}
