package config

import (
	"bytes"
	"strings"
	"testing"
)

// Two renderings of the default installation are byte-identical: the
// committed manifest changes only when the code does.
func TestManifestIsDeterministic(t *testing.T) {
	render := func() []byte {
		objs, err := OperatorObjects(DefaultOperatorOptions())
		if err != nil {
			t.Fatal(err)
		}
		out, err := Manifest(objs)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	first, second := render(), render()
	if !bytes.Equal(first, second) {
		t.Fatalf("two renderings of the default installation differ:\n%s\n---- and ----\n%s", first, second)
	}
	for _, unwanted := range []string{"creationTimestamp: null", "\nstatus:"} {
		if strings.Contains(string(first), unwanted) {
			t.Errorf("the manifest contains %q, which nobody applies", unwanted)
		}
	}
	if n := strings.Count(string(first), "\n---\n") + 1; !strings.HasPrefix(string(first), "#") || n < 10 {
		t.Errorf("the manifest should be a header of comments and one document per object; it has %d separators", n-1)
	}
}
