package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

// rowTimes says where a finished rollout's nodes spent their time, from
// its rows' stamps (to the second, as the API stores them): for each
// stretch of a row, the median, the 90th percentile and the longest over
// the rows that have both stamps; and the handover, how long after a slot
// was freed (a row's finishedAt, in order) the node that took it started.
func rowTimes(ro *nmv1alpha1.NodeMaintenanceRollout, slots int) string {
	rows := ro.Status.Nodes
	stretch := func(name string, from, to func(nmv1alpha1.RolloutNode) *metav1.Time) string {
		var s Sample
		for _, row := range rows {
			if a, b := from(row), to(row); a != nil && b != nil {
				s.Values = append(s.Values, b.Sub(a.Time).Seconds())
			}
		}
		return stretchLine(name, s)
	}
	started := func(r nmv1alpha1.RolloutNode) *metav1.Time { return r.StartedAt }
	drained := func(r nmv1alpha1.RolloutNode) *metav1.Time { return r.DrainedAt }
	restored := func(r nmv1alpha1.RolloutNode) *metav1.Time { return r.RestoredAt }
	recovered := func(r nmv1alpha1.RolloutNode) *metav1.Time { return r.RecoveredAt }
	finished := func(r nmv1alpha1.RolloutNode) *metav1.Time { return r.FinishedAt }
	lines := []string{
		fmt.Sprintf("rollout %s, %d nodes, %d at once: where each node's time went (stamps to the second)", ro.Name, len(rows), slots),
		stretch("started → drained (admission, cordon, drain)", started, drained),
		stretch("drained → restored (the child's deletion and restore)", drained, restored),
		stretch("restored → recovered (its workloads available again)", restored, recovered),
		stretch("recovered → done", recovered, finished),
		stretch("a whole node, started → done", started, finished),
		stretchLine("handover, a slot freed → the next node started", handovers(rows, slots)),
	}
	return strings.Join(lines, "\n")
}

// handovers pairs the k-th start after the first slots with the k-th
// finish, both in time order: how long each freed slot stood empty.
func handovers(rows []nmv1alpha1.RolloutNode, slots int) Sample {
	var starts, ends []time.Time
	for _, row := range rows {
		if row.StartedAt != nil {
			starts = append(starts, row.StartedAt.Time)
		}
		if row.FinishedAt != nil {
			ends = append(ends, row.FinishedAt.Time)
		}
	}
	slices.SortFunc(starts, time.Time.Compare)
	slices.SortFunc(ends, time.Time.Compare)
	var s Sample
	for k := 0; slots+k < len(starts) && k < len(ends); k++ {
		s.Values = append(s.Values, starts[slots+k].Sub(ends[k]).Seconds())
	}
	return s
}

func stretchLine(name string, s Sample) string {
	if len(s.Values) == 0 {
		return fmt.Sprintf("  %s: no rows", name)
	}
	_, longest := s.Spread()
	return fmt.Sprintf("  %s: median %.0f s, p90 %.0f s, longest %.0f s (%d rows)", name, s.Median(), s.Percentile(90), longest, len(s.Values))
}
