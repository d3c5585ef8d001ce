package validation

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

// A rollout keeps a row per node in its status, and the API server keeps
// the whole object in one etcd value: etcd refuses one of more than 1.5 MiB
// (its default --max-request-bytes), and the API server then refuses the
// write ("etcdserver: request is too large"). A rollout whose rows outgrew
// that could no longer record its progress. So the operator compacts the
// rows of finished nodes once the rows pass RowsBudget (CompactRows), and a
// set whose rows would not fit even compacted is refused before anything
// starts (SetSizeProblem): by the webhook, at plan time, and by the operator
// when it resolves a selector.

// RowsBudget is how many bytes of JSON status.nodes may take before the
// operator compacts the rows of nodes that are Done (CompactRow). It leaves
// the rest of etcd's 1.5 MiB to spec.nodeNames and the other status fields
// (the API server drops managedFields from an object that would be too
// large, and keeps it).
const RowsBudget = 1 << 20

// setBudget is how many bytes the rows of a set may take when all of them
// are compacted: three quarters of RowsBudget, so that the rows in progress,
// which keep their details (the workloads the recovery gate waits for), have
// the last quarter.
const setBudget = RowsBudget / 4 * 3

// CompactRow is what the row of a Done node keeps once the rows pass
// RowsBudget: its name, wave, state and when it started and finished. The
// rest (its NodeMaintenance, which is gone; its step Job, which is labeled
// with the rollout and the node; the times in between; its workloads, which
// only the recovery gate read) is dropped. Rows in progress and failed rows
// are never compacted.
func CompactRow(row v1alpha1.RolloutNode) v1alpha1.RolloutNode {
	return v1alpha1.RolloutNode{Name: row.Name, Wave: row.Wave, State: row.State, StartedAt: row.StartedAt, FinishedAt: row.FinishedAt}
}

// CompactRows keeps rows (status.nodes) within budget bytes of JSON, so that
// the status of a large set stays writable: while the rows take more, it
// compacts (CompactRow) the rows of nodes that were already Done in old (the
// status as the operator read it), in row order, the first finished first.
// A row that becomes Done in this write keeps its details for it, for the
// events and notifications of the change. Rows in progress and failed rows
// keep theirs; a set too large for that is refused before it starts
// (SetSizeProblem).
func CompactRows(rows, old []v1alpha1.RolloutNode, budget int) {
	total, err := json.Marshal(rows)
	if err != nil || len(total) <= budget {
		return
	}
	wasDone := make(map[string]bool, len(old))
	for i := range old {
		if old[i].State == v1alpha1.NodeDone {
			wasDone[old[i].Name] = true
		}
	}
	over := len(total) - budget
	for i := 0; i < len(rows) && over > 0; i++ {
		if rows[i].State != v1alpha1.NodeDone || !wasDone[rows[i].Name] {
			continue
		}
		compact := CompactRow(rows[i])
		before, errBefore := json.Marshal(rows[i])
		after, errAfter := json.Marshal(compact)
		if errBefore != nil || errAfter != nil || len(after) >= len(before) {
			continue // already compact
		}
		rows[i] = compact
		over -= len(before) - len(after)
	}
}

// SetSizeProblem says, for a set of nodes that could not be recorded in one
// rollout's status even with every row compacted (CompactRow), what to do;
// "" when the set fits. A 5000-node set (Kubernetes' largest cluster) of
// names of up to about 50 characters fits.
func SetSizeProblem(field string, names []string) string {
	stamp := metav1.NewTime(time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC))
	rows := make([]v1alpha1.RolloutNode, len(names))
	for i, name := range names {
		rows[i] = CompactRow(v1alpha1.RolloutNode{Name: name, Wave: int32(len(names)), State: v1alpha1.NodeDone, StartedAt: &stamp, FinishedAt: &stamp})
	}
	b, err := json.Marshal(rows)
	if err != nil || len(b) <= setBudget {
		return ""
	}
	most := len(names) * setBudget / len(b)
	return fmt.Sprintf("the set of %s has %d nodes, more than one rollout can keep a status row for (about %d nodes of these names; "+
		"the status is one object, which etcd keeps to 1.5 MiB): split the set into rollouts of at most %d nodes, "+
		"for example by zone (topology.kubernetes.io/zone) or by a label of your own", field, len(names), most, most)
}
