package validation_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// The cluster has the CRDs and no operator: the test writes the status the
// operator would write, and the API server and etcd say whether they keep it.
func TestMain(m *testing.M) {
	os.Exit(testcluster.Main(m, testcluster.Options{InstallCRD: true, NoSpareNode: true}))
}

// A rollout of the largest set the rules admit, 5000 nodes of cloud names
// listed in spec.nodeNames, keeps its status writable from start to end with
// its rows compacted (validation.CompactRows), and does not without.
func TestRolloutStatusOfTheLargestSetIsStored(t *testing.T) {
	c := testcluster.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	names := validation.CloudNames(5000)
	if p := validation.SetSizeProblem("spec.nodeNames", names); p != "" {
		t.Fatalf("the set is refused: %s", p)
	}
	ro := &v1alpha1.NodeMaintenanceRollout{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.UniqueName(t, "largest")},
		Spec:       v1alpha1.NodeMaintenanceRolloutSpec{NodeNames: names, MaxUnavailable: ptr.To(intstr.FromString("10%"))},
	}
	if err := c.Client.Create(ctx, ro); err != nil {
		t.Fatalf("create a rollout of %d nodes: %v", len(names), err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), ro) })

	write := func(what string, rows []v1alpha1.RolloutNode) error {
		ro.Status = v1alpha1.NodeMaintenanceRolloutStatus{Phase: v1alpha1.RolloutProgressing, Total: int32(len(rows)), Nodes: rows}
		err := c.Client.Status().Update(ctx, ro)
		if err != nil {
			if got := c.Client.Get(ctx, client.ObjectKeyFromObject(ro), ro); got != nil {
				t.Fatalf("read rollout %s back after %s: %v", ro.Name, what, got)
			}
		}
		return err
	}

	// Every row Done with its details: more than etcd keeps of one object.
	if err := write("the uncompacted end", validation.DoneRows(names)); err == nil {
		t.Fatalf("the status of %d Done rows with every detail was stored: the test no longer shows the limit it guards", len(names))
	} else if !strings.Contains(err.Error(), "too large") && !strings.Contains(err.Error(), "larger than max") {
		t.Fatalf("the uncompacted status was refused for another reason than its size: %v", err)
	}

	// The middle of the rollout: 4500 Done before this write, 500 in
	// progress with their workloads.
	old := validation.DoneRows(names)
	rows := validation.DoneRows(names)
	for i := 4500; i < len(rows); i++ {
		rows[i].State, rows[i].FinishedAt = v1alpha1.NodeRecovering, nil
		rows[i].WaitingForWorkloads = rows[i].Workloads
		old[i] = rows[i]
	}
	validation.CompactRows(rows, old, validation.RowsBudget)
	if err := write("the middle", rows); err != nil {
		t.Fatalf("the compacted status of the middle of the rollout was refused: %v", err)
	}

	// The end: every row Done, the last 500 in this write.
	end := validation.DoneRows(names)
	validation.CompactRows(end, rows, validation.RowsBudget)
	if err := write("the end", end); err != nil {
		t.Fatalf("the compacted status of the end of the rollout was refused: %v", err)
	}
	validation.CompactRows(end, end, validation.RowsBudget)
	if err := write("the end, a pass later", end); err != nil {
		t.Fatalf("the compacted status a pass after the end was refused: %v", err)
	}
}
