package testcluster

import (
	"fmt"
	"strings"
	"testing"
)

// Without TF_ACC a test that needs the cluster skips and says how to run it,
// so a bare `go test ./...` is the unit tests.
func TestGetSkipsWithoutTFAccAndSaysHowToRun(t *testing.T) {
	t.Setenv(AccEnv, "")
	var skipped bool
	var reason string
	t.Run("needs a cluster", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		rec := &skipRecorder{TB: t}
		defer func() { reason = rec.msg }()
		Get(rec)
		t.Error("Get returned without a cluster")
	})
	if !skipped {
		t.Fatal("Get did not skip the test")
	}
	for _, want := range []string{"TF_ACC=1", "make test"} {
		if !strings.Contains(reason, want) {
			t.Errorf("skip message %q does not mention %q", reason, want)
		}
	}
}

// skipRecorder keeps the message Skip was given.
type skipRecorder struct {
	testing.TB
	msg string
}

func (r *skipRecorder) Skip(args ...any) {
	r.msg = fmt.Sprint(args...)
	r.TB.Skip(args...)
}
