package validation

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

// cloudNames are n node names as a cloud gives them, of 42 to 46
// characters (ip-10-12-19-135.eu-central-1.compute.internal).
func cloudNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("ip-10-12-%d-%d.eu-central-1.compute.internal", i/256, i%256)
	}
	return names
}

// doneRows are the rows of names at the end of a rollout: Done, with every
// detail, five workloads each.
func doneRows(names []string) []v1alpha1.RolloutNode {
	at := metav1.NewTime(time.Date(2026, 12, 7, 1, 2, 3, 0, time.UTC))
	rows := make([]v1alpha1.RolloutNode, len(names))
	for i, name := range names {
		rows[i] = v1alpha1.RolloutNode{Name: name, Wave: int32(i/500 + 1), State: v1alpha1.NodeDone, Maintenance: "patch-pool-a-" + name,
			StartedAt: &at, DrainedAt: &at, StepFinishedAt: &at, RestoredAt: &at, RecoveredAt: &at, FinishedAt: &at,
			Workloads: []string{"Deployment team-a/web", "Deployment team-a/api", "StatefulSet team-b/db", "Deployment monitoring/agent", "Deployment kube-system/coredns"}}
	}
	return rows
}

func rowsSize(t *testing.T, rows []v1alpha1.RolloutNode) int {
	t.Helper()
	b, err := json.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

func TestSetSizeProblemAdmitsTheLargestClusterAndRefusesMore(t *testing.T) {
	if p := SetSizeProblem("spec.nodeNames", cloudNames(5000)); p != "" {
		t.Errorf("5000 nodes of cloud names (Kubernetes' largest cluster) refused: %s", p)
	}
	long := make([]string, 5000)
	for i := range long {
		long[i] = fmt.Sprintf("gke-production-cluster-high-memory-pool-1a2b3c4d-%04d", i)
	}
	for _, tc := range []struct {
		what  string
		names []string
	}{{"8000 cloud names", cloudNames(8000)}, {"5000 names of 53 characters", long}} {
		p := SetSizeProblem(`spec.nodeSelector "pool=a"`, tc.names)
		if p == "" {
			t.Errorf("%s admitted: their rows take more than %d bytes compacted", tc.what, setBudget)
			continue
		}
		for _, want := range []string{`the set of spec.nodeSelector "pool=a" has ` + fmt.Sprint(len(tc.names)) + " nodes", "1.5 MiB", "split the set into rollouts of at most"} {
			if !strings.Contains(p, want) {
				t.Errorf("%s: problem %q does not say %q", tc.what, p, want)
			}
		}
	}
}

func TestValidateRolloutRefusesNodeNamesTooManyForTheStatus(t *testing.T) {
	ro := validRollout()
	ro.Spec.NodeSelector, ro.Spec.NodeNames = nil, cloudNames(8000)
	err := ValidateRollout(ro, false)
	if err == nil || !strings.Contains(err.Error(), "the set of spec.nodeNames has 8000 nodes") {
		t.Fatalf("8000 node names: got %v, want the set's size refused", err)
	}
	ro.Spec.NodeNames = cloudNames(5000)
	if err := ValidateRollout(ro, false); err != nil {
		t.Fatalf("5000 node names: %v", err)
	}
}

func TestCompactRowsCompactsOnlyRowsDoneBeforeUntilTheyFit(t *testing.T) {
	names := cloudNames(3000)
	full := doneRows(names)
	budget := rowsSize(t, full) * 2 / 3

	rows := doneRows(names)
	rows[0].State, rows[0].FinishedAt = v1alpha1.NodeFailed, nil
	rows[0].Reason = "its drain failed"
	old := doneRows(names)
	old[1].State = v1alpha1.NodeSoaking // Done in this write: keeps its details
	CompactRows(rows, old, budget)

	if got := rowsSize(t, rows); got > budget {
		t.Errorf("rows take %d bytes after compaction, budget %d", got, budget)
	}
	if rows[0].Reason == "" || rows[0].Workloads == nil {
		t.Errorf("a failed row was compacted: %+v", rows[0])
	}
	if rows[1].Maintenance == "" || rows[1].DrainedAt == nil {
		t.Errorf("a row Done only in this write was compacted: %+v", rows[1])
	}
	if want := CompactRow(full[2]); rows[2].Maintenance != "" || rows[2].Workloads != nil || rows[2].RestoredAt != nil ||
		rows[2].Name != want.Name || rows[2].Wave != want.Wave || rows[2].StartedAt == nil || rows[2].FinishedAt == nil {
		t.Errorf("the first row Done before is not compacted to name, wave, state, startedAt, finishedAt: %+v", rows[2])
	}
	last := rows[len(rows)-1]
	if last.Maintenance == "" || last.Workloads == nil {
		t.Errorf("the last row was compacted too: compaction goes on only until the rows fit (%+v)", last)
	}

	small := doneRows(names[:10])
	CompactRows(small, doneRows(names[:10]), budget)
	if small[0].Maintenance == "" {
		t.Errorf("rows within the budget were compacted: %+v", small[0])
	}
}
