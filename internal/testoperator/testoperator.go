// Package testoperator runs the operator in the test process against a
// testcluster, built by internal/operator/manager exactly as the binary builds it, in
// out-of-cluster mode (webhook on a loopback port, registered by URL).
package testoperator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/controller"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/manager"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// DefaultOptions are quick to react: short leases and lease retries.
func DefaultOptions() manager.Options {
	return manager.Options{
		LeaseDuration: 6 * time.Second,
		Controller:    controller.Options{LeaseRetryInterval: 500 * time.Millisecond, SkipNameValidation: true},
	}
}

// Operator is a running operator.
type Operator struct {
	cancel context.CancelFunc
	done   chan error
	// MetricsURL is the operator's Prometheus endpoint.
	MetricsURL string
}

// Stop stops the operator and waits for it to end. Safe on nil.
func (o *Operator) Stop() {
	if o == nil {
		return
	}
	o.cancel()
	<-o.done
}

// Start runs the operator until Stop, and returns once its webhook answers.
func Start(c *testcluster.Cluster, o manager.Options) (*Operator, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	metricsPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	o.WebhookPort = port
	o.WebhookHost = "127.0.0.1"
	o.LocalWebhookURL = fmt.Sprintf("https://127.0.0.1:%d", port)
	o.WebhookCertDir = filepath.Join(os.TempDir(), fmt.Sprintf("nm-test-webhook-%d", port))
	o.MetricsBindAddress = fmt.Sprintf("127.0.0.1:%d", metricsPort)
	o.HealthProbeBindAddress = "0"
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := manager.New(ctx, c.RESTConfig, o)
	if err != nil {
		cancel()
		return nil, err
	}
	run := &Operator{cancel: cancel, done: make(chan error, 1), MetricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)}
	go func() { run.done <- mgr.Start(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for {
		err := WebhookAnswers(context.Background(), c)
		if err == nil {
			return run, nil
		}
		if time.Now().After(deadline) {
			run.Stop()
			return nil, fmt.Errorf("the operator's webhook did not become ready: last answer %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// WebhookAnswers returns nil when the operator's webhook serves: a dry-run
// create for a node that does not exist is refused by the webhook itself, not
// by a connection error. Otherwise it returns the answer the create got.
func WebhookAnswers(ctx context.Context, c *testcluster.Cluster) error {
	probe := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "readiness-probe"}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: "no-such-node-readiness-probe"}}
	err := c.Client.Create(ctx, probe, client.DryRunAll)
	if err != nil && strings.Contains(err.Error(), "does not exist") {
		return nil
	}
	if err == nil {
		return fmt.Errorf("a NodeMaintenance for a node that does not exist was admitted: no webhook in the way")
	}
	return err
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) { return testcluster.FreePort() }
