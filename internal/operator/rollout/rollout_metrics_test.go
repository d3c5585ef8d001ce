package rollout

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

// TestRolloutGaugesReportEveryPhaseAndState: each rollout has one series per
// phase (1 for its own, a missing phase counted as Pending) and per node
// state; a deleted rollout has none.
func TestRolloutGaugesReportEveryPhaseAndState(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := nmv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	halted := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "kernel"},
		Status: nmv1alpha1.NodeMaintenanceRolloutStatus{Phase: nmv1alpha1.RolloutHalted, Nodes: []nmv1alpha1.RolloutNode{
			{Name: "node01", State: nmv1alpha1.NodeDone}, {Name: "node02", State: nmv1alpha1.NodeFailed},
			{Name: "node03", State: nmv1alpha1.NodeWaiting}, {Name: "node04", State: nmv1alpha1.NodeWaiting},
		}}}
	fresh := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}
	var reader client.Reader = fake.NewClientBuilder().WithScheme(scheme).WithObjects(halted, fresh).Build()
	c := newStatusCollector()
	c.reader.Store(&reader)

	want := `
# HELP nodemaintenance_rollout_phase 1 for the phase each NodeMaintenanceRollout is in (Pending before its first status), 0 for the others.
# TYPE nodemaintenance_rollout_phase gauge
nodemaintenance_rollout_phase{name="fresh",phase="Halted"} 0
nodemaintenance_rollout_phase{name="fresh",phase="Paused"} 0
nodemaintenance_rollout_phase{name="fresh",phase="Pending"} 1
nodemaintenance_rollout_phase{name="fresh",phase="Progressing"} 0
nodemaintenance_rollout_phase{name="fresh",phase="Succeeded"} 0
nodemaintenance_rollout_phase{name="kernel",phase="Halted"} 1
nodemaintenance_rollout_phase{name="kernel",phase="Paused"} 0
nodemaintenance_rollout_phase{name="kernel",phase="Pending"} 0
nodemaintenance_rollout_phase{name="kernel",phase="Progressing"} 0
nodemaintenance_rollout_phase{name="kernel",phase="Succeeded"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "nodemaintenance_rollout_phase"); err != nil {
		t.Error(err)
	}
	wantNodes := `
# HELP nodemaintenance_rollout_nodes Nodes of each NodeMaintenanceRollout by state (status.nodes).
# TYPE nodemaintenance_rollout_nodes gauge
nodemaintenance_rollout_nodes{name="fresh",state="Done"} 0
nodemaintenance_rollout_nodes{name="fresh",state="Draining"} 0
nodemaintenance_rollout_nodes{name="fresh",state="Failed"} 0
nodemaintenance_rollout_nodes{name="fresh",state="Holding"} 0
nodemaintenance_rollout_nodes{name="fresh",state="Recovering"} 0
nodemaintenance_rollout_nodes{name="fresh",state="Restoring"} 0
nodemaintenance_rollout_nodes{name="fresh",state="Soaking"} 0
nodemaintenance_rollout_nodes{name="fresh",state="StepRunning"} 0
nodemaintenance_rollout_nodes{name="fresh",state="Waiting"} 0
nodemaintenance_rollout_nodes{name="kernel",state="Done"} 1
nodemaintenance_rollout_nodes{name="kernel",state="Draining"} 0
nodemaintenance_rollout_nodes{name="kernel",state="Failed"} 1
nodemaintenance_rollout_nodes{name="kernel",state="Holding"} 0
nodemaintenance_rollout_nodes{name="kernel",state="Recovering"} 0
nodemaintenance_rollout_nodes{name="kernel",state="Restoring"} 0
nodemaintenance_rollout_nodes{name="kernel",state="Soaking"} 0
nodemaintenance_rollout_nodes{name="kernel",state="StepRunning"} 0
nodemaintenance_rollout_nodes{name="kernel",state="Waiting"} 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(wantNodes), "nodemaintenance_rollout_nodes"); err != nil {
		t.Error(err)
	}
}
