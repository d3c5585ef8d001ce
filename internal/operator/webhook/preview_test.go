package webhook

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

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
