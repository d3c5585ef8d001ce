package bench

import (
	"flag"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

func TestParseSteps(t *testing.T) {
	steps, err := parseSteps(p8DefaultSteps)
	if err != nil || len(steps) != 4 || steps[0] != 10 || steps[3] != 5000 {
		t.Fatalf("parseSteps(%q) = %v, %v", p8DefaultSteps, steps, err)
	}
	if steps, err := parseSteps(" 10, 20 "); err != nil || len(steps) != 2 || steps[1] != 20 {
		t.Errorf("spaces: %v, %v", steps, err)
	}
	for _, bad := range []string{"", "10,x", "10,0", "100,10", "10,10", "-5"} {
		if _, err := parseSteps(bad); err == nil {
			t.Errorf("parseSteps(%q) accepted", bad)
		}
	}
	if got := targetStep([]int{10, 5000, 8000}, 5000); got != 5000 {
		t.Errorf("target of a list with 5000 = %d", got)
	}
	if got := targetStep([]int{10, 100}, 5000); got != 100 {
		t.Errorf("target of a list without 5000 = %d, want the largest", got)
	}
}

func TestGrowthTable(t *testing.T) {
	steps := []p8Step{
		{nodes: 10, pods: 100, populate: 3 * time.Second, op: 0.4, limit: 0.2, rss: 50, heap: 10, perPod: 2, idleCPU: 0.005,
			processRSS: map[string]float64{"kube-apiserver": 300}, processCPU: map[string]float64{"kube-apiserver": 0.1}},
		{nodes: 5000, pods: 50000, op: 0.6, limit: 0.4, admissionExisting: 500, succeeded: 500, admissionP50: 12, admissionP99: 40},
	}
	wantLines(t, "growth table", p8GrowthTable(steps, 5000),
		"| 10 | 100 | 3 s | 0.400 s | 0.200 s | 2.00× | 50.0 MB | 10.0 MB | 2.00 | 0.0050 cores | 300 MB / 0.10 cores |",
		"| 5000 (target) | 50000 |",
		"At 5000 nodes, a NodeMaintenance create's return while 500 exist (500 Succeeded): p50 12.0 ms, p99 40.0 ms.",
	)
}

func TestRowTimes(t *testing.T) {
	at := func(s int) *metav1.Time { v := metav1.NewTime(time.Unix(1000+int64(s), 0)); return &v }
	ro := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Status: nmv1alpha1.NodeMaintenanceRolloutStatus{Nodes: []nmv1alpha1.RolloutNode{
		{StartedAt: at(0), DrainedAt: at(4), RestoredAt: at(6), RecoveredAt: at(9), FinishedAt: at(9)},
		{StartedAt: at(0), DrainedAt: at(2), RestoredAt: at(3), RecoveredAt: at(3), FinishedAt: at(3)},
		{StartedAt: at(5), DrainedAt: at(7), RestoredAt: at(8), RecoveredAt: at(8), FinishedAt: at(8)},
		{StartedAt: at(11)},
	}}}
	wantLines(t, "rowTimes", rowTimes(ro, 2),
		"rollout r, 4 nodes, 2 at once",
		"started → drained (admission, cordon, drain): median 2 s, p90 4 s, longest 4 s (3 rows)",
		"restored → recovered (its workloads available again): median 0 s, p90 3 s, longest 3 s (3 rows)",
		"a whole node, started → done: median 3 s, p90 9 s, longest 9 s (3 rows)",
		// Slots freed at 3 and 8 (then 9); the third and fourth nodes started at 5 and 11.
		"handover, a slot freed → the next node started: median 2 s, p90 3 s, longest 3 s (2 rows)",
	)
}

func TestLargeClusterAsked(t *testing.T) {
	f := flag.Lookup("test.bench")
	old := f.Value.String()
	t.Cleanup(func() { _ = f.Value.Set(old) })
	for pattern, want := range map[string]bool{".": true, "P7": true, "P8": true, "P1$": false, "P[1-6]": false, "P1|P7": true, "P7/x": true, "": false} {
		if err := f.Value.Set(pattern); err != nil {
			t.Fatal(err)
		}
		if got := largeClusterAsked(); got != want {
			t.Errorf("-test.bench %q: largeClusterAsked() = %v, want %v", pattern, got, want)
		}
	}
}
