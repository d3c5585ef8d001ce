package webhook

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// A preview that cannot be made (here: the fake client has no field index
// for the pod lists) is a warning on an admitted create, never a refusal.
func TestPreviewFailureIsAWarningNotARefusal(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = nmv1beta1.AddToScheme(scheme)
	reader := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(readyNode("node01"), readyNode("node02")).Build()
	v := &Validator{Reader: reader, Writer: reader, PreviewDrain: true}
	warnings, err := v.ValidateCreate(context.Background(), nm("a", "node01"))
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], "could not preview the drain of node node01 (") ||
		!strings.HasSuffix(warnings[0], "…") {
		t.Fatalf("warnings = %q, want one that says the preview failed, cut to %d characters", warnings, maxWarningLength)
	}
	if n := utf8.RuneCountInString(warnings[0]); n != maxWarningLength {
		t.Errorf("the warning has %d characters, want %d", n, maxWarningLength)
	}
}

// A rollout's own NodeMaintenance gets no preview: its creator, the rollout
// controller, reads no warnings. Another owner does not change that a create
// gets one.
func TestRolloutChildGetsNoPreview(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = nmv1beta1.AddToScheme(scheme)
	reader := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(readyNode("node01"), readyNode("node02"), readyNode("node03")).Build()
	v := &Validator{Reader: reader, Writer: reader, PreviewDrain: true}
	child := nm("r-node01", "node01")
	child.OwnerReferences = []metav1.OwnerReference{{APIVersion: nmv1alpha1.GroupVersion.String(), Kind: nmv1alpha1.RolloutKind, Name: "r", UID: "u1", Controller: ptr.To(true)}}
	warnings, err := v.ValidateCreate(context.Background(), child)
	if err != nil || len(warnings) != 0 {
		t.Fatalf("a rollout's NodeMaintenance: %q, %v; want admitted without warnings", warnings, err)
	}
	other := nm("x-node02", "node02")
	other.OwnerReferences = []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: nmv1alpha1.RolloutKind, Name: "x", UID: "u2", Controller: ptr.To(true)}}
	if warnings, err := v.ValidateCreate(context.Background(), other); err != nil || len(warnings) != 1 {
		t.Fatalf("a NodeMaintenance another group's kind owns: %q, %v; want admitted with the preview's warning", warnings, err)
	}
}
