package provider_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testoperator"
)

// Ctrl-C (SIGINT) while apply waits for the drain, and while destroy waits
// for the node to come back, as a user or a cancelled CI job does it. The
// interrupted apply keeps the maintenance in the state (not tainted), the
// next apply waits for the same NodeMaintenance instead of draining again,
// and a second destroy finishes the restore the first one started.
func TestAccInterruptedApplyAndDestroyConverge(t *testing.T) {
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		ctx := context.Background()
		ns := c.Namespace(t)
		pool := c.NewPool(t)
		node := pool.AddNode(t, "").Name
		// Pods that take a while to go: the drain outlasts the interrupt.
		c.CreateDeployment(t, ns, "slow", 2, pool.Selector(), testcluster.WithTerminationDelay(12*time.Second))
		c.WaitRunningPods(t, ns, "slow", node, 2)
		pool.AddNode(t, "")
		name := "maintain-" + node

		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(requiredProvider+maintenanceConfig(c, node, "interrupted", "")), 0o644); err != nil {
			t.Fatal(err)
		}
		tf := newCLIRun(t, dir)
		destroyed := false
		t.Cleanup(func() {
			if !destroyed {
				_, _ = tf.run(t, "destroy", "-auto-approve")
			}
		})

		// apply, interrupted while the drain is under way.
		out := tf.interrupt(t, func() bool {
			nm := &nmv1beta1.NodeMaintenance{}
			return c.Client.Get(ctx, client.ObjectKey{Name: name}, nm) == nil &&
				nm.Status.Phase == nmv1beta1.MaintenanceRunning && nm.Status.DrainProgress < 100
		}, "apply", "-auto-approve")
		if !strings.Contains(out, "Interrupted While Waiting for the Node to Drain") {
			t.Errorf("the interrupted apply does not say what it left:\n%s", out)
		}
		first := &nmv1beta1.NodeMaintenance{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, first); err != nil {
			t.Fatalf("the interrupted apply lost the NodeMaintenance: %v", err)
		}
		if got := tf.stateList(t); strings.TrimSpace(got) != "nodemaintenance.this" {
			t.Errorf("state after the interrupted apply: %q, want nodemaintenance.this", got)
		}

		// apply again: an in-place update that waits, not a replacement.
		plan, err := tf.run(t, "plan", "-detailed-exitcode")
		if exitCode(err) != 2 || !strings.Contains(plan, "updated in-place") || strings.Contains(plan, "replaced") {
			t.Errorf("plan after the interrupted apply (exit %d) should update in place:\n%s", exitCode(err), plan)
		}
		tf.mustRun(t, "apply", "-auto-approve")
		again := &nmv1beta1.NodeMaintenance{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, again); err != nil {
			t.Fatal(err)
		}
		if again.UID != first.UID || again.Status.Phase != nmv1beta1.MaintenanceSucceeded {
			t.Errorf("the second apply did not converge on the same NodeMaintenance: uid %s → %s, phase %s", first.UID, again.UID, again.Status.Phase)
		}
		list := &nmv1beta1.NodeMaintenanceList{}
		if err := c.Client.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		for _, nm := range list.Items {
			if nm.Spec.NodeName == node && nm.Name != name {
				t.Errorf("duplicate NodeMaintenance %s for node %s", nm.Name, node)
			}
		}
		if _, err := tf.run(t, "plan", "-detailed-exitcode"); err != nil {
			t.Errorf("plan after the converged apply is not empty: %v", err)
		}

		// destroy, interrupted while the node is not restored yet: the
		// operator is away, so the finalizer stays.
		operator.Stop()
		back := func() {
			if operator == nil {
				var err error
				if operator, err = testoperator.Start(c, testoperator.DefaultOptions()); err != nil {
					t.Errorf("restart the package operator: %v", err)
				}
			}
		}
		operator = nil
		t.Cleanup(back)
		out = tf.interrupt(t, func() bool {
			nm := &nmv1beta1.NodeMaintenance{}
			return c.Client.Get(ctx, client.ObjectKey{Name: name}, nm) == nil && nm.DeletionTimestamp != nil
		}, "destroy", "-auto-approve")
		if !strings.Contains(out, "Interrupted While Waiting for the Node to Be Restored") {
			t.Errorf("the interrupted destroy does not say what it left:\n%s", out)
		}
		if got := tf.stateList(t); strings.TrimSpace(got) != "nodemaintenance.this" {
			t.Errorf("state after the interrupted destroy: %q, want nodemaintenance.this", got)
		}
		back()
		tf.mustRun(t, "destroy", "-auto-approve")
		destroyed = true
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &nmv1beta1.NodeMaintenance{}); err == nil {
			t.Errorf("NodeMaintenance %s is left after the second destroy", name)
		}
		if err := nodeCheck(c, node, schedulable)(nil); err != nil {
			t.Error(err)
		}
		if got := tf.stateList(t); strings.TrimSpace(got) != "" {
			t.Errorf("state after destroy: %q", got)
		}
	})
}

// requiredProvider names the provider that dev_overrides points at this
// checkout's build.
const requiredProvider = `terraform {
  required_providers {
    nodemaintenance = {
      source = "nodemaintenance/nodemaintenance"
    }
  }
}
`

// interrupt starts the CLI with args, sends it SIGINT once ready() holds, and
// returns its output once it has exited.
func (r *cliRun) interrupt(t *testing.T, ready func() bool, args ...string) string {
	t.Helper()
	cmd := exec.Command(r.cli, append(args[:1:1], append([]string{"-no-color"}, args[1:]...)...)...)
	cmd.Dir, cmd.Env = r.dir, r.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	testcluster.WaitFor(t, 2*time.Minute, strings.Join(args, " ")+" to get under way", func(context.Context) (bool, error) {
		select {
		case err := <-done:
			t.Fatalf("%s %s ended before the interrupt (%v):\n%s", filepath.Base(r.cli), strings.Join(args, " "), err, out.String())
		default:
		}
		return ready(), nil
	})
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Logf("%s %s, interrupted (exit %d):\n%s", filepath.Base(r.cli), strings.Join(args, " "), exitCode(err), out.String())
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("%s %s did not end within 2m of SIGINT:\n%s", filepath.Base(r.cli), strings.Join(args, " "), out.String())
	}
	return out.String()
}

// stateList is `state list` (which takes no -no-color).
func (r *cliRun) stateList(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(r.cli, "state", "list")
	cmd.Dir, cmd.Env = r.dir, r.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s state list: %v\n%s", filepath.Base(r.cli), err, out)
	}
	return string(out)
}

// exitCode is the exit status of a finished command (0 for no error).
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}
