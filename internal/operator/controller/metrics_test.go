package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// maintenanceAt is a NodeMaintenance of node, created at the Unix second
// created, with status st.
func maintenanceAt(name, node string, created int64, st nmv1beta1.NodeMaintenanceStatus) *nmv1beta1.NodeMaintenance {
	return &nmv1beta1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(created, 0))},
		Spec:       nmv1beta1.NodeMaintenanceSpec{NodeName: node},
		Status:     st,
	}
}

func collectorOver(t *testing.T, objs ...client.Object) *phaseCollector {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := nmv1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var reader client.Reader = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	c := newPhaseCollector()
	c.reader.Store(&reader)
	return c
}

// TestPerMaintenanceGaugesFollowTheRunningOnes: each Running maintenance has
// its gauges, labelled by name and node; a budget's refusal shows as
// blocked; finished maintenances have none, so their series end with them.
func TestPerMaintenanceGaugesFollowTheRunningOnes(t *testing.T) {
	blocked := maintenanceAt("blocked", "node01", 1000, nmv1beta1.NodeMaintenanceStatus{
		Phase: nmv1beta1.MaintenanceRunning, DrainProgress: 50,
		PendingPodsRefs: []nmv1beta1.PodReference{{Namespace: "a", Name: "p1"}, {Namespace: "a", Name: "p2"}},
		Conditions: []metav1.Condition{{Type: nmv1beta1.ConditionDrained, Status: metav1.ConditionFalse,
			Reason: nmv1beta1.ReasonBlockedByPDB, LastTransitionTime: metav1.NewTime(time.Unix(1000, 0))}},
	})
	draining := maintenanceAt("draining", "node02", 2000, nmv1beta1.NodeMaintenanceStatus{
		Phase: nmv1beta1.MaintenanceRunning, DrainProgress: 100,
		Conditions: []metav1.Condition{{Type: nmv1beta1.ConditionDrained, Status: metav1.ConditionFalse,
			Reason: nmv1beta1.ReasonDraining, LastTransitionTime: metav1.NewTime(time.Unix(2000, 0))}},
	})
	fresh := maintenanceAt("fresh", "node03", 3000, nmv1beta1.NodeMaintenanceStatus{})
	done := maintenanceAt("done", "node04", 4000, nmv1beta1.NodeMaintenanceStatus{Phase: nmv1beta1.MaintenanceSucceeded})
	failed := maintenanceAt("failed", "node05", 5000, nmv1beta1.NodeMaintenanceStatus{Phase: nmv1beta1.MaintenanceFailed})
	c := collectorOver(t, blocked, draining, fresh, done, failed)

	want := `
# HELP nodemaintenance_maintenance_blocked_by_pdb 1 while the last drain round of a Running NodeMaintenance had an eviction refused (condition Drained False, reason BlockedByPDB), else 0.
# TYPE nodemaintenance_maintenance_blocked_by_pdb gauge
nodemaintenance_maintenance_blocked_by_pdb{name="blocked",node="node01"} 1
nodemaintenance_maintenance_blocked_by_pdb{name="draining",node="node02"} 0
nodemaintenance_maintenance_blocked_by_pdb{name="fresh",node="node03"} 0
# HELP nodemaintenance_maintenance_pending_pods Pods of each Running NodeMaintenance not evicted yet (status.pendingPodsRefs).
# TYPE nodemaintenance_maintenance_pending_pods gauge
nodemaintenance_maintenance_pending_pods{name="blocked",node="node01"} 2
nodemaintenance_maintenance_pending_pods{name="draining",node="node02"} 0
nodemaintenance_maintenance_pending_pods{name="fresh",node="node03"} 0
# HELP nodemaintenance_maintenance_drain_progress_ratio Share (0 to 1) of the pods that had to be evicted that are gone, of each Running NodeMaintenance (status.drainProgress).
# TYPE nodemaintenance_maintenance_drain_progress_ratio gauge
nodemaintenance_maintenance_drain_progress_ratio{name="blocked",node="node01"} 0.5
nodemaintenance_maintenance_drain_progress_ratio{name="draining",node="node02"} 1
nodemaintenance_maintenance_drain_progress_ratio{name="fresh",node="node03"} 0
# HELP nodemaintenance_maintenance_running_since_timestamp_seconds Creation time (Unix seconds) of each NodeMaintenance still Running (queued ones included).
# TYPE nodemaintenance_maintenance_running_since_timestamp_seconds gauge
nodemaintenance_maintenance_running_since_timestamp_seconds{name="blocked",node="node01"} 1000
nodemaintenance_maintenance_running_since_timestamp_seconds{name="draining",node="node02"} 2000
nodemaintenance_maintenance_running_since_timestamp_seconds{name="fresh",node="node03"} 3000
# HELP nodemaintenance_maintenances NodeMaintenances by phase (an empty phase: not reconciled yet).
# TYPE nodemaintenance_maintenances gauge
nodemaintenance_maintenances{phase=""} 1
nodemaintenance_maintenances{phase="Failed"} 1
nodemaintenance_maintenances{phase="Running"} 2
nodemaintenance_maintenances{phase="Succeeded"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"nodemaintenance_maintenance_blocked_by_pdb", "nodemaintenance_maintenance_pending_pods",
		"nodemaintenance_maintenance_drain_progress_ratio", "nodemaintenance_maintenance_running_since_timestamp_seconds",
		"nodemaintenance_maintenances"); err != nil {
		t.Error(err)
	}
}

// TestNoMaintenanceNoPerObjectSeries: without maintenances only the counts
// by phase are reported (zero), no per-object series.
func TestNoMaintenanceNoPerObjectSeries(t *testing.T) {
	if n := testutil.CollectAndCount(collectorOver(t), "nodemaintenance_maintenance_pending_pods"); n != 0 {
		t.Errorf("%d pending-pods series without any NodeMaintenance, want none", n)
	}
}
