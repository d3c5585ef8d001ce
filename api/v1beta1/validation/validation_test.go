package validation

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
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
// and of anything else heavier than the standard library and apimachinery's
// validation and intstr packages.
func TestImportsStayLight(t *testing.T) {
	allowed := map[string]bool{
		"k8s.io/apimachinery/pkg/util/intstr":     true,
		"k8s.io/apimachinery/pkg/util/validation": true,
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
