package validation

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

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

// The provider links this package: it must stay free of controller-runtime
// and of anything else heavier than the standard library, apimachinery's
// validation and intstr packages and the core API types.
func TestImportsStayLight(t *testing.T) {
	allowed := map[string]bool{
		"k8s.io/apimachinery/pkg/util/intstr":     true,
		"k8s.io/apimachinery/pkg/util/validation": true,
		"k8s.io/apimachinery/pkg/apis/meta/v1":    true,
		// The Node type of the guards: types only, which the provider links anyway.
		"k8s.io/api/core/v1": true,
		// The API types, which import apimachinery only.
		"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1": true,
	}
	files, err := filepath.Glob("*.go")
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
			path, _ := strconv.Unquote(imp.Path.Value)
			if !allowed[path] && strings.Contains(strings.Split(path, "/")[0], ".") {
				t.Errorf("%s imports %s; this package may import only the standard library and %v", file, path, allowed)
			}
		}
	}
}

func TestValidateDrain(t *testing.T) {
	d := func(s string) *metav1.Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		return &metav1.Duration{Duration: v}
	}
	ok := []*v1beta1.DrainPolicy{
		nil,
		{},
		{Timeout: d("30m")},
		{Timeout: d("30m"), OnTimeout: v1beta1.DrainTimeoutRestore},
		{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
		{GracePeriodSeconds: ptr.To[int64](0), SkipWaitForDeleteTimeout: d("5m")},
	}
	for _, p := range ok {
		if err := ValidateDrain(p, false); err != nil {
			t.Errorf("%+v refused: %v", p, err)
		}
	}
	bad := []struct {
		p          v1beta1.DrainPolicy
		allowForce bool
		want       string
	}{
		{v1beta1.DrainPolicy{Timeout: d("0s")}, false, "spec.drain.timeout"},
		{v1beta1.DrainPolicy{Timeout: d("-1m")}, false, "must be positive"},
		{v1beta1.DrainPolicy{OnTimeout: v1beta1.DrainTimeoutFail}, false, "needs spec.drain.timeout"},
		{v1beta1.DrainPolicy{Timeout: d("1m"), OnTimeout: "Later"}, false, "one of Fail, Restore, Force"},
		{v1beta1.DrainPolicy{Timeout: d("1m"), OnTimeout: v1beta1.DrainTimeoutForce}, false, "allow_force_drain"},
		{v1beta1.DrainPolicy{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}}, false, "spec.drain.podSelector"},
		{v1beta1.DrainPolicy{GracePeriodSeconds: ptr.To[int64](-1)}, false, "spec.drain.gracePeriodSeconds"},
		{v1beta1.DrainPolicy{SkipWaitForDeleteTimeout: d("0s")}, false, "spec.drain.skipWaitForDeleteTimeout"},
	}
	for _, tt := range bad {
		err := ValidateDrain(&tt.p, tt.allowForce)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: error %v, want one that says %q", tt.p, err, tt.want)
		}
	}
	if err := ValidateDrain(&v1beta1.DrainPolicy{Timeout: d("1m"), OnTimeout: v1beta1.DrainTimeoutForce}, true); err != nil {
		t.Errorf("Force refused where the installation allows it: %v", err)
	}
}
