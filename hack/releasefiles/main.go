// Command releasefiles puts the release's extra files into a goreleaser dist
// directory under the names the release gives them, so that dist/ holds every
// file the SHA256SUMS file lists. goreleaser sums `checksum.extra_files` under
// their release names but writes them only when it uploads a release
// (`release.extra_files`), which a snapshot never does. hack/release-snapshot.sh
// runs it after goreleaser.
//
//	go run ./hack/releasefiles -dist dist
//
// It reads what goreleaser ran with from the directory itself (config.yaml, the
// effective configuration; metadata.json, the project name and version), and
// copies from the working directory, where goreleaser found the files.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"text/template"

	"sigs.k8s.io/yaml"
)

// extraFile is an entry of goreleaser's `extra_files`.
type extraFile struct {
	Glob         string `json:"glob"`
	NameTemplate string `json:"name_template"`
}

// releaseConfig is the part of goreleaser's effective configuration
// (dist/config.yaml) that names files outside dist.
type releaseConfig struct {
	Checksum struct {
		ExtraFiles []extraFile `json:"extra_files"`
	} `json:"checksum"`
	Release struct {
		ExtraFiles []extraFile `json:"extra_files"`
	} `json:"release"`
}

// metadata is goreleaser's dist/metadata.json.
type metadata struct {
	ProjectName string `json:"project_name"`
	Version     string `json:"version"`
}

func main() {
	dist := flag.String("dist", "dist", "The goreleaser dist directory to complete.")
	flag.Parse()
	copied, err := complete(*dist)
	if err != nil {
		fmt.Fprintf(os.Stderr, "[release] ERROR: %v\n", err)
		os.Exit(1)
	}
	for _, c := range copied {
		fmt.Fprintf(os.Stderr, "[release] %s -> %s\n", c[0], filepath.Join(*dist, c[1]))
	}
}

// complete copies every extra file of the release into dist; it returns the
// pairs (source, release name) it copied, sorted by name.
func complete(dist string) ([][2]string, error) {
	var cfg releaseConfig
	if err := readInto(filepath.Join(dist, "config.yaml"), &cfg, func(b []byte, v any) error { return yaml.Unmarshal(b, v) }); err != nil {
		return nil, err
	}
	var meta metadata
	if err := readInto(filepath.Join(dist, "metadata.json"), &meta, json.Unmarshal); err != nil {
		return nil, err
	}
	files, err := releaseNames(append(cfg.Checksum.ExtraFiles, cfg.Release.ExtraFiles...), meta, filepath.Glob)
	if err != nil {
		return nil, err
	}
	var copied [][2]string
	for name, src := range files {
		if err := copyFile(src, filepath.Join(dist, name)); err != nil {
			return nil, err
		}
		copied = append(copied, [2]string{src, name})
	}
	sort.Slice(copied, func(i, j int) bool { return copied[i][1] < copied[j][1] })
	return copied, nil
}

func readInto(path string, v any, unmarshal func([]byte, any) error) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("no goreleaser run to complete: %w", err)
	}
	if err := unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// releaseNames maps each release name to the file it is a copy of. The same
// file may be listed in both checksum and release extra_files; two different
// files under one name are an error, as is a glob that matches nothing.
func releaseNames(entries []extraFile, meta metadata, glob func(string) ([]string, error)) (map[string]string, error) {
	files := map[string]string{}
	for _, e := range entries {
		matches, err := glob(e.Glob)
		if err != nil {
			return nil, fmt.Errorf("extra_files glob %q: %w", e.Glob, err)
		}
		if len(matches) == 0 {
			return nil, fmt.Errorf("extra_files glob %q matches no file in %s", e.Glob, mustGetwd())
		}
		for _, src := range matches {
			name := filepath.Base(src)
			if e.NameTemplate != "" {
				if len(matches) > 1 {
					return nil, fmt.Errorf("extra_files glob %q matches %d files but has one name_template", e.Glob, len(matches))
				}
				if name, err = render(e.NameTemplate, meta); err != nil {
					return nil, err
				}
			}
			if prev, ok := files[name]; ok && prev != src {
				return nil, fmt.Errorf("extra_files name %s for both %s and %s", name, prev, src)
			}
			files[name] = src
		}
	}
	return files, nil
}

// render fills a name_template. Only the fields a release name needs are
// known here; any other makes an error rather than a wrong name.
func render(nameTemplate string, meta metadata) (string, error) {
	t, err := template.New("name_template").Option("missingkey=error").Parse(nameTemplate)
	if err != nil {
		return "", fmt.Errorf("name_template %q: %w", nameTemplate, err)
	}
	var b bytes.Buffer
	fields := map[string]string{"ProjectName": meta.ProjectName, "Version": meta.Version}
	if err := t.Execute(&b, fields); err != nil {
		return "", fmt.Errorf("name_template %q: hack/releasefiles knows only .ProjectName and .Version: %w", nameTemplate, err)
	}
	if b.Len() == 0 || filepath.Base(b.String()) != b.String() {
		return "", fmt.Errorf("name_template %q gives %q, not a file name", nameTemplate, b.String())
	}
	return b.String(), nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return out.Close()
}

func mustGetwd() string {
	wd, err := os.Getwd()
	if err != nil {
		return "the working directory"
	}
	return wd
}
