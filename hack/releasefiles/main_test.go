package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestReleaseNames(t *testing.T) {
	meta := metadata{ProjectName: "terraform-provider-nodemaintenance", Version: "0.1.0-dev-abc1234"}
	manifest := extraFile{Glob: "terraform-registry-manifest.json", NameTemplate: "{{ .ProjectName }}_{{ .Version }}_manifest.json"}
	tree := map[string][]string{
		"terraform-registry-manifest.json": {"terraform-registry-manifest.json"},
		"deploy/*.yaml":                    {"deploy/a.yaml", "deploy/b.yaml"},
		"other.json":                       {"other.json"},
	}
	glob := func(pattern string) ([]string, error) { return tree[pattern], nil }
	tests := []struct {
		name    string
		entries []extraFile
		want    map[string]string
		wantErr string
	}{
		{name: "renamed", entries: []extraFile{manifest},
			want: map[string]string{"terraform-provider-nodemaintenance_0.1.0-dev-abc1234_manifest.json": "terraform-registry-manifest.json"}},
		{name: "listed for checksum and release alike", entries: []extraFile{manifest, manifest},
			want: map[string]string{"terraform-provider-nodemaintenance_0.1.0-dev-abc1234_manifest.json": "terraform-registry-manifest.json"}},
		{name: "kept names", entries: []extraFile{{Glob: "deploy/*.yaml"}},
			want: map[string]string{"a.yaml": "deploy/a.yaml", "b.yaml": "deploy/b.yaml"}},
		{name: "no match", entries: []extraFile{{Glob: "missing.json"}}, wantErr: `"missing.json" matches no file`},
		{name: "one name for many", entries: []extraFile{{Glob: "deploy/*.yaml", NameTemplate: "x.yaml"}}, wantErr: "matches 2 files"},
		{name: "two files one name", entries: []extraFile{manifest, {Glob: "other.json", NameTemplate: manifest.NameTemplate}},
			wantErr: "for both terraform-registry-manifest.json and other.json"},
		{name: "unknown field", entries: []extraFile{{Glob: "other.json", NameTemplate: "{{ .Tag }}.json"}},
			wantErr: "knows only .ProjectName and .Version"},
		{name: "a path", entries: []extraFile{{Glob: "other.json", NameTemplate: "sub/{{ .Version }}.json"}},
			wantErr: "not a file name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := releaseNames(tt.entries, meta, glob)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCompleteCopiesFromEffectiveConfig runs the whole step on a dist
// directory laid out as goreleaser leaves it.
func TestCompleteCopiesFromEffectiveConfig(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	dist := filepath.Join(dir, "dist")
	files := map[string]string{
		"terraform-registry-manifest.json": `{"version": 1}` + "\n",
		"dist/metadata.json":               `{"project_name":"p","version":"1.2.3-dev-x"}`,
		"dist/config.yaml": `project_name: p
release:
  draft: true
  extra_files:
    - glob: terraform-registry-manifest.json
      name_template: '{{ .ProjectName }}_{{ .Version }}_manifest.json'
checksum:
  name_template: '{{ .ProjectName }}_{{ .Version }}_SHA256SUMS'
  extra_files:
    - glob: terraform-registry-manifest.json
      name_template: '{{ .ProjectName }}_{{ .Version }}_manifest.json'
changelog:
  disable: "true"
`,
	}
	if err := os.Mkdir(dist, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copied, err := complete("dist")
	if err != nil {
		t.Fatal(err)
	}
	if want := [][2]string{{"terraform-registry-manifest.json", "p_1.2.3-dev-x_manifest.json"}}; !reflect.DeepEqual(copied, want) {
		t.Errorf("copied %v, want %v", copied, want)
	}
	got, err := os.ReadFile(filepath.Join(dist, "p_1.2.3-dev-x_manifest.json"))
	if err != nil || string(got) != files["terraform-registry-manifest.json"] {
		t.Errorf("dist's manifest holds %q (%v), want the file's bytes", got, err)
	}
}
