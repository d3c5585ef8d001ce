// Package e2e runs the operator (built by operator/manager, exactly as the
// binary does) against a real local cluster and checks what it does to nodes
// and pods.
package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/operator/controller"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/operator/manager"
)

// operator is the package's running operator; tests that need other flags
// replace it with restartOperator.
var operator *runningOperator

func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Options{InstallCRD: true, Setup: func(c *testcluster.Cluster) error {
		log.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapLevel())))
		var err error
		operator, err = startOperator(c, defaultOptions())
		return err
	}, Teardown: func() {
		if operator != nil {
			operator.stop()
		}
	}}))
}

func defaultOptions() manager.Options {
	return manager.Options{
		LeaseDuration: 6 * time.Second,
		Controller:    controller.Options{LeaseRetryInterval: 500 * time.Millisecond, SkipNameValidation: true},
	}
}

type runningOperator struct {
	cancel     context.CancelFunc
	done       chan error
	metricsURL string
}

func (o *runningOperator) stop() {
	if o == nil {
		return
	}
	o.cancel()
	<-o.done
}

// startOperator runs the operator in this process, out-of-cluster mode: the
// webhook listens on a free loopback port and is registered by URL.
func startOperator(c *testcluster.Cluster, o manager.Options) (*runningOperator, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	o.WebhookPort = port
	o.WebhookHost = "127.0.0.1"
	o.LocalWebhookURL = fmt.Sprintf("https://127.0.0.1:%d", port)
	o.WebhookCertDir = filepath.Join(os.TempDir(), fmt.Sprintf("nm-e2e-webhook-%d", port))
	metricsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	o.MetricsBindAddress = fmt.Sprintf("127.0.0.1:%d", metricsPort)
	o.HealthProbeBindAddress = "0"
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := manager.New(ctx, c.RESTConfig, o)
	if err != nil {
		cancel()
		return nil, err
	}
	run := &runningOperator{cancel: cancel, done: make(chan error, 1), metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)}
	go func() { run.done <- mgr.Start(ctx) }()
	// Ready when the webhook answers: a dry-run create of an invalid object is
	// refused by the webhook itself, not by a connection error.
	deadline := time.Now().Add(time.Minute)
	for {
		probe := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "readiness-probe"}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: "no-such-node-readiness-probe"}}
		err := c.Client.Create(context.Background(), probe, client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), "does not exist") {
			return run, nil
		}
		if time.Now().After(deadline) {
			run.stop()
			return nil, fmt.Errorf("the operator's webhook did not become ready: last answer %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// restartOperator replaces the package operator with one built from o, and
// puts the default one back when the test ends.
func restartOperator(t *testing.T, c *testcluster.Cluster, o manager.Options) {
	t.Helper()
	operator.stop()
	var err error
	if operator, err = startOperator(c, o); err != nil {
		t.Fatalf("restart the operator: %v", err)
	}
	t.Cleanup(func() {
		operator.stop()
		if operator, err = startOperator(c, defaultOptions()); err != nil {
			t.Errorf("restart the default operator: %v", err)
		}
	})
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func zapLevel() zapcore.Level {
	if os.Getenv("NM_TEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel // the tests say what happened
}
