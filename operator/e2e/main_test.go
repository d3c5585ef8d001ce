// Package e2e runs the operator (built by internal/operator/manager, exactly as the
// binary does) against a real local cluster and checks what it does to nodes
// and pods.
package e2e

import (
	"os"
	"testing"

	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/manager"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testoperator"
)

// operator is the package's running operator; tests that need other flags
// replace it with restartOperator.
var operator *testoperator.Operator

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Options{InstallCRD: true, Audit: true, UnmanagedNodes: true, Setup: func(c *testcluster.Cluster) error {
		log.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapLevel())))
		var err error
		operator, err = testoperator.Start(c, defaultOptions())
		return err
	}, Teardown: func() {
		operator.Stop()
		process.Remove() // the binary of runOperatorProcess, if a test built it
	}}))
}

func defaultOptions() manager.Options { return testoperator.DefaultOptions() }

// restartOperator replaces the package operator with one built from o, and
// puts the default one back when the test ends.
func restartOperator(t *testing.T, c *testcluster.Cluster, o manager.Options) {
	t.Helper()
	operator.Stop()
	var err error
	if operator, err = testoperator.Start(c, o); err != nil {
		t.Fatalf("restart the operator: %v", err)
	}
	t.Cleanup(func() {
		operator.Stop()
		if operator, err = testoperator.Start(c, defaultOptions()); err != nil {
			t.Errorf("restart the default operator: %v", err)
		}
	})
}

func zapLevel() zapcore.Level {
	if os.Getenv("NM_TEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel // the tests say what happened
}
