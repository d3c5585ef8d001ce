package v1beta1_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Options{InstallCRD: true}))
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// The seed's minimal example is stored and served back exactly as written.
func TestCRDStoresSeedExampleUnchanged(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ctxFor(t)

	nm := &nmv1beta1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "maintain-node02"},
		Spec:       nmv1beta1.NodeMaintenanceSpec{NodeName: "node02", Reason: "硬體更換 - RAM 升級"},
	}
	if err := c.Client.Create(ctx, nm); err != nil {
		t.Fatalf("create the seed example: %v", err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), nm) })

	got := &nmv1beta1.NodeMaintenance{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: "maintain-node02"}, got); err != nil {
		t.Fatalf("read it back: %v", err)
	}
	if got.Spec != nm.Spec {
		t.Fatalf("spec changed on the way through the API server: wrote %+v, read %+v", nm.Spec, got.Spec)
	}
	if got.Namespace != "" {
		t.Fatalf("NodeMaintenance must be cluster-scoped, got namespace %q", got.Namespace)
	}

	// Status is a subresource: a status write changes only status, and the
	// JSON names are the seed's.
	got.Status = nmv1beta1.NodeMaintenanceStatus{
		Phase:           nmv1beta1.MaintenanceRunning,
		DrainProgress:   60,
		LastUpdate:      metav1.Now(),
		TotalPods:       10,
		EvictionPods:    6,
		PendingPods:     []string{"my-app-5f9b8c6d4-rlmwt"},
		PendingPodsRefs: []nmv1beta1.PodReference{{Namespace: "default", Name: "my-app-5f9b8c6d4-rlmwt"}},
	}
	if err := c.Client.Status().Update(ctx, got); err != nil {
		t.Fatalf("update status: %v", err)
	}
	raw := &unstructured.Unstructured{}
	raw.SetGroupVersionKind(nmv1beta1.GroupVersion.WithKind(nmv1beta1.Kind))
	if err := c.Client.Get(ctx, client.ObjectKey{Name: "maintain-node02"}, raw); err != nil {
		t.Fatalf("read it back unstructured: %v", err)
	}
	for _, field := range []string{"phase", "drainProgress", "lastUpdate", "totalPods", "evictionPods", "pendingPods", "pendingPodsRefs"} {
		if _, found, _ := unstructured.NestedFieldNoCopy(raw.Object, "status", field); !found {
			t.Errorf("status.%s missing from the stored object: %v", field, raw.Object["status"])
		}
	}
}

// `kubectl get nm` shows the seed's columns; -o wide adds reason and last error.
func TestKubectlGetShowsPrinterColumns(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ctxFor(t)
	nm := &nmv1beta1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: "columns-node07"},
		Spec:       nmv1beta1.NodeMaintenanceSpec{NodeName: "node07", Reason: "firmware"},
	}
	if err := c.Client.Create(ctx, nm); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), nm) })

	tests := []struct {
		args    []string
		headers []string
		values  []string
	}{
		{[]string{"get", "nm"}, []string{"NAME", "NODENAME", "PHASE", "PROGRESS", "AGE"}, []string{"columns-node07", "node07"}},
		{[]string{"get", "nm", "-o", "wide"}, []string{"NODENAME", "PHASE", "REASON", "LASTERROR"}, []string{"node07", "firmware"}},
		{[]string{"get", "nodemaintenances.nodemaintenance.medik8s.io", "columns-node07"}, []string{"NODENAME", "PHASE"}, []string{"node07"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, err := c.Kubectl(ctx, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
			for _, h := range tt.headers {
				if !contains(header, h) {
					t.Errorf("header %q missing from kubectl output:\n%s", h, out)
				}
			}
			for _, v := range tt.values {
				if !strings.Contains(out, v) {
					t.Errorf("value %q missing from kubectl output:\n%s", v, out)
				}
			}
		})
	}
}

// The schema itself refuses bad objects, with the API server's own errors.
func TestCRDSchemaRejectsInvalidObjects(t *testing.T) {
	c := testcluster.Get(t)
	ctx := ctxFor(t)

	tests := []struct {
		name    string
		spec    map[string]any
		wantErr string
	}{
		{"missing nodeName", map[string]any{"reason": "no node"}, `spec.nodeName: Required value`},
		{"empty nodeName", map[string]any{"nodeName": ""}, `spec.nodeName: Invalid value: "": spec.nodeName in body should be at least 1 chars long`},
		{"nodeName too long", map[string]any{"nodeName": strings.Repeat("n", 254)}, `spec.nodeName: Too long: may not be more than 253 bytes`},
		{"reason too long", map[string]any{"nodeName": "node01", "reason": strings.Repeat("é", nmv1beta1.MaxReasonLength+1)}, `spec.reason: Too long: may not be more than 1024`},
		{"nodeName not a string", map[string]any{"nodeName": 42}, `spec.nodeName: Invalid value: "integer": spec.nodeName in body must be of type string`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": nmv1beta1.GroupVersion.String(),
				"kind":       nmv1beta1.Kind,
				"metadata":   map[string]any{"name": "invalid-" + string(rune('a'+i))},
				"spec":       tt.spec,
			}}
			err := c.Client.Create(ctx, obj)
			if err == nil {
				_ = c.Client.Delete(context.Background(), obj)
				t.Fatalf("the API server accepted an invalid object: %v", tt.spec)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got %v", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error does not say %q:\n%v", tt.wantErr, err)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
