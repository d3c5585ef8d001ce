package drain

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// The operator and the provider both use this package, package live and
// package nodestate: none of them may import either side, nor (except live,
// whose job is reading through a client) controller-runtime.
func TestSharedPackagesImportNeitherSide(t *testing.T) {
	const module = "github.com/nodemaintenance/terraform-provider-nodemaintenance/"
	for dir, mayUseClient := range map[string]bool{".": false, "live": true, "../nodestate": false} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path := strings.Trim(imp.Path.Value, `"`)
				switch {
				case strings.HasPrefix(path, module+"internal/operator"), strings.HasPrefix(path, module+"internal/provider"):
					t.Errorf("%s imports %s: the shared drain packages must not depend on the operator or the provider", file, path)
				case strings.HasPrefix(path, "sigs.k8s.io/controller-runtime") && !mayUseClient:
					t.Errorf("%s imports %s: only package live may use controller-runtime", file, path)
				}
			}
		}
	}
}
