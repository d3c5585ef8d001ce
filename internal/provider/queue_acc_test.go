package provider_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testoperator"
)

// Two pipelines share --max-unavailable=2 (the Queue policy): the first
// configuration holds two nodes; an apply for a third node whose create
// timeout runs out in the queue says so and destroy takes it out; the apply of a second configuration for a
// third node waits, its NodeMaintenance queued behind the first two and its
// node untouched, says so in its timeline, and completes once the first
// configuration is destroyed.
func TestAccQueuedApplyWaitsForAnotherConfiguration(t *testing.T) {
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		ctx := context.Background()
		waitNoMaintenances(t, c)
		o := testoperator.DefaultOptions()
		o.MaxUnavailable = "2"
		o.MaxUnavailablePolicy = validation.MaxUnavailableQueue
		operator.Stop()
		var err error
		if operator, err = testoperator.Start(c, o); err != nil {
			t.Fatalf("start the operator with --max-unavailable=2: %v", err)
		}
		t.Cleanup(func() {
			operator.Stop()
			if operator, err = testoperator.Start(c, testoperator.DefaultOptions()); err != nil {
				t.Errorf("restart the package operator: %v", err)
			}
		})

		pool := c.NewPool(t)
		n1, n2, n3 := pool.AddNode(t, "").Name, pool.AddNode(t, "").Name, pool.AddNode(t, "").Name
		first := newCLIRun(t, writeConfig(t, providerBlock(c)+fmt.Sprintf(`
resource "nodemaintenance" "a" {
  node_name = %q
}

resource "nodemaintenance" "b" {
  node_name = %q
}
`, n1, n2)))
		second := newCLIRun(t, writeConfig(t, providerBlock(c)+fmt.Sprintf(`
resource "nodemaintenance" "c" {
  node_name = %q
}
`, n3)))
		firstDestroyed, secondDestroyed := false, false
		t.Cleanup(func() {
			if !secondDestroyed {
				_, _ = second.run(t, "destroy", "-auto-approve")
			}
			if !firstDestroyed {
				_, _ = first.run(t, "destroy", "-auto-approve")
			}
		})

		first.mustRun(t, "apply", "-auto-approve")
		// Both of the first configuration's maintenances hold the slots,
		// named in the queue's order.
		want := fmt.Sprintf("queued behind %s: --max-unavailable=2", behindOrder(t, c, "maintain-"+n1, "maintain-"+n2))

		// A create timeout that runs out in the queue says so; destroy
		// leaves the queue, the node untouched throughout.
		short := newCLIRun(t, writeConfig(t, providerBlock(c)+fmt.Sprintf(`
resource "nodemaintenance" "c" {
  node_name = %q
  timeouts {
    create = "3s"
  }
}
`, n3)))
		outShort, err := short.run(t, "apply", "-auto-approve")
		if err == nil || !strings.Contains(outShort, "Timed Out Waiting in the Maintenance Queue") ||
			!strings.Contains(strings.Join(strings.Fields(outShort), " "), "It never started: it is "+want) {
			t.Errorf("an apply whose create timeout ran out in the queue (%v) does not say so:\n%s", err, outShort)
		}
		if err := nodeCheck(c, n3, schedulable)(nil); err != nil {
			t.Errorf("the queued maintenance touched its node: %v", err)
		}
		short.mustRun(t, "destroy", "-auto-approve")
		if err := c.Client.Get(ctx, client.ObjectKey{Name: "maintain-" + n3}, &nmv1beta1.NodeMaintenance{}); err == nil {
			t.Errorf("maintain-%s is left after its destroy", n3)
		}

		// The second apply, with the provider's timeline (TF_LOG_PROVIDER=INFO).
		cmd := exec.Command(second.cli, "apply", "-no-color", "-auto-approve")
		cmd.Dir, cmd.Env = second.dir, append(append([]string{}, second.env...), "TF_LOG_PROVIDER=INFO")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				<-done
			}
		})

		queued := "maintain-" + n3
		testcluster.WaitFor(t, 2*time.Minute, queued+" to be queued", func(ctx context.Context) (bool, error) {
			select {
			case err := <-done:
				t.Fatalf("the second apply ended while the first configuration holds both slots (%v):\n%s", err, out.String())
			default:
			}
			nm := &nmv1beta1.NodeMaintenance{}
			if err := c.Client.Get(ctx, client.ObjectKey{Name: queued}, nm); err != nil {
				return false, err
			}
			q := meta.FindStatusCondition(nm.Status.Conditions, nmv1beta1.ConditionQueued)
			if q != nil && q.Status == "True" && strings.HasPrefix(q.Message, want) {
				return true, nil
			}
			return false, fmt.Errorf("status now: %+v", nm.Status)
		})
		if err := nodeCheck(c, n3, schedulable)(nil); err != nil {
			t.Errorf("the queued maintenance touched its node: %v", err)
		}
		// Still waiting a moment later.
		select {
		case err := <-done:
			t.Fatalf("the second apply ended while queued (%v):\n%s", err, out.String())
		case <-time.After(2 * time.Second):
		}

		first.mustRun(t, "destroy", "-auto-approve")
		firstDestroyed = true
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the second apply failed after the first configuration was destroyed (%v):\n%s", err, out.String())
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("the second apply did not complete within 2m of the first configuration's destroy:\n%s", out.String())
		}
		if i := strings.Index(out.String(), want); i < 0 {
			t.Errorf("the second apply's timeline does not say %q:\n%s", want, out.String())
		} else {
			line := out.String()[max(0, strings.LastIndex(out.String()[:i], "\n")+1):]
			t.Logf("timeline: %s", line[:strings.IndexByte(line+"\n", '\n')])
		}
		if err := nodeCheck(c, n3, cordoned)(nil); err != nil {
			t.Error(err)
		}
		nm := &nmv1beta1.NodeMaintenance{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: queued}, nm); err != nil || nm.Status.Phase != nmv1beta1.MaintenanceSucceeded {
			t.Errorf("%s after the second apply: phase %q, %v; want Succeeded", queued, nm.Status.Phase, err)
		}
		second.mustRun(t, "destroy", "-auto-approve")
		secondDestroyed = true
		if err := nodeCheck(c, n3, schedulable)(nil); err != nil {
			t.Error(err)
		}
	})
}

// writeConfig writes main.tf, with the provider source the CLI runs take
// from dev_overrides, into a new directory.
func writeConfig(t *testing.T, hcl string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(requiredProvider+hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// behindOrder names the NodeMaintenances in the queue's order:
// creationTimestamp, then name.
func behindOrder(t *testing.T, c *testcluster.Cluster, a, b string) string {
	t.Helper()
	get := func(name string) *nmv1beta1.NodeMaintenance {
		nm := &nmv1beta1.NodeMaintenance{}
		if err := c.Client.Get(context.Background(), client.ObjectKey{Name: name}, nm); err != nil {
			t.Fatal(err)
		}
		return nm
	}
	x, y := get(a), get(b)
	if y.CreationTimestamp.Before(&x.CreationTimestamp) || (y.CreationTimestamp.Equal(&x.CreationTimestamp) && y.Name < x.Name) {
		x, y = y, x
	}
	return x.Name + ", " + y.Name
}

// waitNoMaintenances waits until earlier tests have cleaned up: the queue
// counts every NodeMaintenance in the cluster.
func waitNoMaintenances(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	testcluster.WaitFor(t, 2*time.Minute, "no NodeMaintenance left by earlier tests", func(ctx context.Context) (bool, error) {
		list := &nmv1beta1.NodeMaintenanceList{}
		if err := c.Client.List(ctx, list); err != nil {
			return false, err
		}
		if len(list.Items) == 0 {
			return true, nil
		}
		return false, fmt.Errorf("%d still there", len(list.Items))
	})
}
