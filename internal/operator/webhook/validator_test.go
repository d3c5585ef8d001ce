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

func TestValidateNodeName(t *testing.T) {
	for _, name := range []string{"node02", "ip-10-0-0-1.ec2.internal", strings.Repeat("a", 253)} {
		if err := ValidateNodeName(name); err != nil {
			t.Errorf("%q refused: %v", name, err)
		}
	}
	for _, name := range []string{"", "Node02", "node_02", "-node", strings.Repeat("a", 254), "node 02"} {
		if err := ValidateNodeName(name); err == nil {
			t.Errorf("%q accepted", name)
		}
	}
}

func FuzzValidateNodeNameNeverPanics(f *testing.F) {
	for _, s := range []string{"node02", "", "Node_02", "a.b.c", "硬體"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := ValidateNodeName(name)
		if err == nil && (name == "" || len(name) > 253 || strings.ToLower(name) != name) {
			t.Fatalf("accepted invalid node name %q", name)
		}
	})
}

func TestMaxUnavailableNodes(t *testing.T) {
	tests := []struct {
		value   string
		total   int
		want    int
		wantErr bool
	}{
		{"2", 10, 2, false},
		{"0", 10, 0, false},
		{"20%", 10, 2, false},
		{"25%", 10, 2, false}, // rounds down
		{"10%", 3, 1, false},  // never below one for a percentage
		{"abc", 10, 0, true},
		{"-1", 10, 0, true},
	}
	for _, tt := range tests {
		v := intstr.Parse(tt.value)
		got, err := MaxUnavailableNodes(&v, tt.total)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("MaxUnavailableNodes(%s, %d) = %d, %v; want %d, err=%v", tt.value, tt.total, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestValidateCreate(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = nmv1beta1.AddToScheme(scheme)
	nodes := []runtime.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node01"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node02"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node03"}},
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(append(nodes, nm("existing", "node01"))...).Build()
	one := intstr.FromInt32(2)
	v := &Validator{Reader: reader, MaxUnavailable: &one}

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

// The flag's count is an int32 (IntOrString): a larger number is refused
// with an error that says so.
func TestParseMaxUnavailable(t *testing.T) {
	for _, tt := range []struct {
		in, want string
		wantErr  string
	}{
		{in: "2", want: "2"},
		{in: "0", want: "0"},
		{in: "20%", want: "20%"},
		{in: " 3 ", wantErr: "invalid --max-unavailable"},
		{in: "2147483647", want: "2147483647"},
		{in: "4294967297", wantErr: "between 0 and 2147483647"},
		{in: "2147483648", wantErr: "between 0 and 2147483647"},
		{in: "-1", wantErr: "must not be negative"},
		{in: "-20%", wantErr: "must not be negative"},
		{in: "two", wantErr: "invalid --max-unavailable"},
		{in: "1.5", wantErr: "invalid --max-unavailable"},
	} {
		v, err := ParseMaxUnavailable(tt.in)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ParseMaxUnavailable(%q) = %s, %v; want an error with %q", tt.in, v.String(), err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || v.String() != tt.want):
			t.Errorf("ParseMaxUnavailable(%q) = %s, %v; want %s", tt.in, v.String(), err, tt.want)
		}
	}
}
