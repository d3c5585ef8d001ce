package webhook

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

func nm(name, node string) *nmv1beta1.NodeMaintenance {
	return &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node}}
}

func TestValidateUpdateRefusesNodeNameChangeWithExactMessage(t *testing.T) {
	v := &Validator{}
	_, err := v.ValidateUpdate(context.Background(), nm("a", "node01"), nm("a", "node02"))
	if err == nil || err.Error() != "updating spec.NodeName isn't allowed" {
		t.Fatalf("got %v", err)
	}
	changedReason := nm("a", "node01")
	changedReason.Spec.Reason = "x"
	if _, err := v.ValidateUpdate(context.Background(), nm("a", "node01"), changedReason); err != nil {
		t.Fatalf("reason change refused: %v", err)
	}
}

func TestValidateCreate(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = nmv1beta1.AddToScheme(scheme)
	nodes := []runtime.Object{
		readyNode("node01"), readyNode("node02"), readyNode("node03"),
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(append(nodes, nm("existing", "node01"))...).Build()
	one := intstr.FromInt32(2)
	v := &Validator{Reader: reader, Writer: reader, MaxUnavailable: &one}

	tests := []struct {
		name, node, wantErr string
	}{
		{"unknown node", "node09", `node "node09" does not exist`},
		{"bad name", "Node02", "is not a valid node name"},
		{"empty", "", "spec.nodeName is required"},
		{"already in maintenance", "node01", `node "node01" is already in maintenance by NodeMaintenance "existing"`},
		{"first free node", "node02", ""},
		{"second create for the same node before the API shows the first", "node02", `already in maintenance by NodeMaintenance "first-free-node"`},
		{"over the limit", "node03", "--max-unavailable=2 (2) allows; nodes already in maintenance: node01 (existing), node02 (first-free-node)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := strings.ReplaceAll(strings.ToLower(tt.name), " ", "-")
			if len(name) > 20 {
				name = name[:15]
			}
			_, err := v.ValidateCreate(context.Background(), nm(name, tt.node))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// readyNode is a Ready, schedulable Node: the guards count it as a node
// that takes pods.
func readyNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}
