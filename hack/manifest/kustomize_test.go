package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// kustomize renders dir with the pinned kubectl's kustomize; it skips the
// test when `make tools` has not built kubectl.
func kustomize(t *testing.T, dir string) []byte {
	t.Helper()
	kubectl, err := testcluster.Tool("kubectl")
	if err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, kubectl, "kustomize", dir).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr)
	}
	return out
}

// objectsByName reads a YAML stream into its objects, keyed by kind,
// namespace and name.
func objectsByName(t *testing.T, raw []byte) map[string]map[string]any {
	t.Helper()
	objs := map[string]map[string]any{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		if len(obj) == 0 {
			continue
		}
		meta, _ := obj["metadata"].(map[string]any)
		key := obj["kind"].(string) + " " + stringOf(meta["namespace"]) + "/" + stringOf(meta["name"])
		if _, dup := objs[key]; dup {
			t.Fatalf("%s twice in the stream", key)
		}
		objs[key] = obj
	}
}

func stringOf(v any) string { s, _ := v.(string); return s }

func deployDir(t *testing.T) string {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "deploy")
}

// The kustomize base renders exactly the objects of the manifest, so
// `kubectl apply -k deploy` and `kubectl apply -f
// deploy/node-maintenance-operator.yaml` install the same thing.
func TestKustomizeBaseIsTheManifest(t *testing.T) {
	dir := deployDir(t)
	manifest, err := os.ReadFile(filepath.Join(dir, config.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	want, got := objectsByName(t, manifest), objectsByName(t, kustomize(t, dir))
	if len(got) != len(want) {
		t.Errorf("kustomize renders %d objects, the manifest has %d", len(got), len(want))
	}
	for key, w := range want {
		if g, ok := got[key]; !ok {
			t.Errorf("kustomize does not render %s", key)
		} else if !reflect.DeepEqual(g, w) {
			gy, _ := yaml.Marshal(g)
			wy, _ := yaml.Marshal(w)
			t.Errorf("kustomize renders %s differently:\n%s\nthe manifest has:\n%s", key, gy, wy)
		}
	}
}

// An overlay moves the installation to another namespace the kustomize way
// (`namespace:`), and every reference follows: the Namespace object, the
// namespaced objects, the RBAC subjects and the webhook's Service. The
// operator reads its own namespace from the pod (POD_NAMESPACE), so its
// certificates name the new Service.
func TestKustomizeOverlaySetsTheNamespace(t *testing.T) {
	const ns = "ops-maintenance"
	overlay := t.TempDir()
	base, err := filepath.Rel(overlay, deployDir(t))
	if err != nil {
		t.Fatal(err)
	}
	kustomization := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + ns + "\nresources:\n  - " + base + "\n"
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	objs := objectsByName(t, kustomize(t, overlay))
	if _, ok := objs["Namespace /"+ns]; !ok {
		t.Errorf("the overlay renders no Namespace %s", ns)
	}
	namespaced := 0
	for key, obj := range objs {
		for _, found := range namespaceFields(obj, "") {
			if found.value != ns {
				t.Errorf("%s: %s is %q, want %q", key, found.path, found.value, ns)
			}
		}
		if meta, _ := obj["metadata"].(map[string]any); stringOf(meta["namespace"]) == ns {
			namespaced++
		}
	}
	if namespaced < 8 {
		t.Errorf("%d objects in namespace %s, want every namespaced object of the installation (8 or more)", namespaced, ns)
	}
}

type namespaceField struct{ path, value string }

// namespaceFields finds every "namespace" string in obj, at any depth.
func namespaceFields(v any, path string) []namespaceField {
	var found []namespaceField
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if s, ok := child.(string); ok && k == "namespace" {
				found = append(found, namespaceField{path + "." + k, s})
			}
			found = append(found, namespaceFields(child, path+"."+k)...)
		}
	case []any:
		for _, child := range v {
			found = append(found, namespaceFields(child, path+"[]")...)
		}
	}
	return found
}
