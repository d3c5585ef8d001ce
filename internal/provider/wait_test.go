package provider

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

func maintenance(phase nmv1beta1.MaintenancePhase, progress int, lastError string, pending ...string) *nmv1beta1.NodeMaintenance {
	nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: "maintain-node02"}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: "node02"}}
	nm.Status.Phase, nm.Status.DrainProgress, nm.Status.LastError = phase, progress, lastError
	for _, p := range pending {
		ns, name, _ := strings.Cut(p, "/")
		nm.Status.PendingPods = append(nm.Status.PendingPods, name)
		nm.Status.PendingPodsRefs = append(nm.Status.PendingPodsRefs, nmv1beta1.PodReference{Namespace: ns, Name: name})
	}
	return nm
}

func TestFinishedAndGone(t *testing.T) {
	tests := []struct {
		nm             *nmv1beta1.NodeMaintenance
		finished, gone bool
	}{
		{nil, true, true},
		{maintenance("", 0, ""), false, false},
		{maintenance(nmv1beta1.MaintenanceRunning, 50, ""), false, false},
		{maintenance(nmv1beta1.MaintenanceSucceeded, 100, ""), true, false},
		{maintenance(nmv1beta1.MaintenanceFailed, 10, "x"), true, false},
	}
	for _, tt := range tests {
		if finished(tt.nm) != tt.finished || gone(tt.nm) != tt.gone {
			t.Errorf("%+v: finished=%v gone=%v", tt.nm, finished(tt.nm), gone(tt.nm))
		}
	}
}

func TestProgressLineIsReadable(t *testing.T) {
	got := progressLine("maintain-node02", maintenance(nmv1beta1.MaintenanceRunning, 40, "pod a/web-1 is blocked by a PodDisruptionBudget", "a/web-1", "b/db-0"))
	want := "NodeMaintenance maintain-node02 (node node02): Running, 40% drained, 2 pending: a/web-1, b/db-0; last error: pod a/web-1 is blocked by a PodDisruptionBudget"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if got := progressLine("x", maintenance("", 0, "")); !strings.Contains(got, "waiting for the operator") {
		t.Fatalf("no phase yet should say the operator has not answered: %q", got)
	}
}

func TestRefListIsBounded(t *testing.T) {
	nm := maintenance(nmv1beta1.MaintenanceRunning, 0, "", "n/a", "n/b", "n/c")
	if got := refList(nm.Status.PendingPodsRefs, 2); got != "n/a, n/b and 1 more" {
		t.Fatalf("refList = %q", got)
	}
}

func TestTimeoutDetailSaysWhatBlocksAndWhatToDo(t *testing.T) {
	nm := maintenance(nmv1beta1.MaintenanceRunning, 50, "The disruption budget web needs 2 healthy pods", "shop/web-1")
	got := timeoutDetail("maintain-node02", nm, 5*time.Minute, errors.New("context deadline exceeded"))
	for _, want := range []string{"5m0s", "Still pending: shop/web-1", "Blocked by: The disruption budget web", `timeouts { create = "60m" }`} {
		if !strings.Contains(got, want) {
			t.Errorf("timeout detail lacks %q:\n%s", want, got)
		}
	}
	if got := timeoutDetail("m", maintenance("", 0, ""), time.Minute, errors.New("deadline")); !strings.Contains(got, "operator running") {
		t.Errorf("an unreconciled NodeMaintenance should point at the operator:\n%s", got)
	}
}

func TestFailedDetailCarriesOperatorError(t *testing.T) {
	nm := maintenance(nmv1beta1.MaintenanceFailed, 20, "could not hold the lease", "a/b")
	for op, tail := range map[string]string{"apply": "tainted", "update": "-replace="} {
		got := failedDetail(nm, op)
		for _, want := range []string{`node "node02"`, "Operator error: could not hold the lease", "Pods still on the node: a/b", "terraform destroy", tail} {
			if !strings.Contains(got, want) {
				t.Errorf("failed detail of %s lacks %q:\n%s", op, want, got)
			}
		}
	}
}

func TestInterruptedDetailSaysTheMaintenanceGoesOn(t *testing.T) {
	got := interruptedDetail("maintain-node02", maintenance(nmv1beta1.MaintenanceRunning, 40, ""))
	for _, want := range []string{`"maintain-node02"`, "goes on in the cluster", "Phase Running, 40% drained", "not tainted", "next `apply` waits"} {
		if !strings.Contains(got, want) {
			t.Errorf("interrupted detail lacks %q:\n%s", want, got)
		}
	}
	if got := interruptedDetail("m", nil); !strings.Contains(got, "not reported progress") {
		t.Errorf("an interrupted wait before any status should say so:\n%s", got)
	}
}

// Only a NodeMaintenance read back as gone counts as deleted: a wait that
// could not read it at all (the API server unreachable right after the
// create) must not make Create drop a maintenance that exists from the state.
func TestAwaitDrainTellsGoneFromUnread(t *testing.T) {
	unreachable := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
		},
	}).Build()
	for _, tt := range []struct {
		name        string
		kube        client.WithWatch
		wantDeleted bool
		wantSummary string
	}{
		{"unreadable", unreachable, false, "Timed Out Waiting for the Node to Drain"},
		{"gone", fake.NewClientBuilder().WithScheme(scheme).WithIndex(&nmv1beta1.NodeMaintenance{}, "metadata.name",
			func(o client.Object) []string { return []string{o.GetName()} }).Build(), true, "NodeMaintenance Deleted While Waiting"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &NodeMaintenanceResource{clients: &clients{kube: tt.kube}}
			var diags diag.Diagnostics
			got, deleted := r.awaitDrain(context.Background(), "maintain-node02", time.Second, &diags, "apply")
			if got != nil || deleted != tt.wantDeleted {
				t.Errorf("awaitDrain = %v, deleted %v; want nil, deleted %v", got, deleted, tt.wantDeleted)
			}
			if !diags.HasError() || diags.Errors()[0].Summary() != tt.wantSummary {
				t.Errorf("diagnostics %v, want the error %q", diags, tt.wantSummary)
			}
		})
	}
}

func queuedMaintenance() *nmv1beta1.NodeMaintenance {
	nm := maintenance(nmv1beta1.MaintenanceRunning, 0, "")
	nm.Status.Conditions = []metav1.Condition{{Type: nmv1beta1.ConditionQueued, Status: metav1.ConditionTrue, Reason: nmv1beta1.ReasonWaitingForSlot,
		Message: "queued behind maintain-node01, maintain-node03: --max-unavailable=2 lets 2 of 6 nodes be in maintenance at once"}}
	return nm
}

// A queued maintenance says whom it waits for, in the timeline and in each
// error, and the timeout says the queue time counted and what the resource's
// state means for its place in the queue.
func TestQueuedMaintenanceIsExplained(t *testing.T) {
	nm := queuedMaintenance()
	const behind = "queued behind maintain-node01, maintain-node03: --max-unavailable=2"
	if got := progressLine("maintain-node02", nm); got != "NodeMaintenance maintain-node02 (node node02): "+nm.Status.Conditions[0].Message {
		t.Errorf("timeline line %q does not quote the queue", got)
	}
	timeout := timeoutDetail("maintain-node02", nm, time.Minute, context.DeadlineExceeded)
	for _, want := range []string{behind, "not cordoned", "counts the time in the queue", "tainted"} {
		if !strings.Contains(timeout, want) {
			t.Errorf("timeout detail lacks %q:\n%s", want, timeout)
		}
	}
	if got := interruptedDetail("maintain-node02", nm); !strings.Contains(got, behind) {
		t.Errorf("interrupted detail lacks the queue:\n%s", got)
	}
	nm.Status.Conditions[0].Status = metav1.ConditionFalse
	if got := progressLine("maintain-node02", nm); strings.Contains(got, "queued") {
		t.Errorf("a started maintenance still reads as queued: %q", got)
	}
}
