package bench

import (
	"strings"
	"testing"
	"time"
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
	out := p8GrowthTable(steps, 5000)
	for _, want := range []string{
		"| 10 | 100 | 3 s | 0.400 s | 0.200 s | 2.00× | 50.0 MB | 10.0 MB | 2.00 | 0.0050 cores | 300 MB / 0.10 cores |",
		"| 5000 (target) | 50000 |",
		"At 5000 nodes, a NodeMaintenance create's return while 500 exist (500 Succeeded): p50 12.0 ms, p99 40.0 ms.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("growth table lacks %q:\n%s", want, out)
		}
	}
}
