package bench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMedianAndSpread(t *testing.T) {
	for _, tc := range []struct {
		values         []float64
		median, lo, hi float64
	}{
		{[]float64{3, 1, 2}, 2, 1, 3},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4},
		{[]float64{7}, 7, 7, 7},
	} {
		s := Sample{Values: tc.values}
		if got := s.Median(); got != tc.median {
			t.Errorf("median of %v = %v, want %v", tc.values, got, tc.median)
		}
		if lo, hi := s.Spread(); lo != tc.lo || hi != tc.hi {
			t.Errorf("spread of %v = %v–%v, want %v–%v", tc.values, lo, hi, tc.lo, tc.hi)
		}
		if tc.values[0] != (Sample{Values: tc.values}).Values[0] {
			t.Errorf("median sorted the caller's values")
		}
	}
	if !math.IsNaN((Sample{}).Median()) {
		t.Error("the median of no runs must be NaN, not a number that looks measured")
	}
}

func TestResultsTable(t *testing.T) {
	rows := []Row{
		{Scenario: "P1", Side: "kubectl drain", Sample: Seconds([]time.Duration{6 * time.Second, 8 * time.Second, 7 * time.Second})},
		{Scenario: "P1", Side: "operator", Sample: Seconds([]time.Duration{time.Second, 2 * time.Second, 3 * time.Second}), Ratio: 2.0 / 7, Of: "kubectl drain", Max: 0.25},
		{Scenario: "P5", Side: "RSS", Sample: Sample{Values: []float64{90}, Unit: "MB"}, Max: 150},
	}
	wantLines(t, "table", Results(rows),
		"| P1 | kubectl drain | 7.000 s | 6.000 s – 8.000 s | 3 |",
		"| P1 | operator | 2.000 s | 1.000 s – 3.000 s | 3 | 0.29× kubectl drain | ≤ 0.25× | **no** |",
		"| P5 | RSS | 90.0 MB | 90.0 MB – 90.0 MB | 1 |  | ≤ 150.0 MB | yes |",
	)
}

// wantLines fails t for each of wants that out, the text named what, lacks.
func wantLines(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, out)
		}
	}
}

func TestSlopeAndHalves(t *testing.T) {
	for _, tc := range []struct {
		values []float64
		slope  float64
	}{
		{[]float64{1, 1, 1, 1}, 0},
		{[]float64{1, 2, 3, 4}, 1},
		{[]float64{0.88, 1.37, 1.25, 1.57, 1.80, 1.25}, 0.0989},
		{[]float64{5}, 0},
	} {
		if got := (Sample{Values: tc.values}).Slope(); math.Abs(got-tc.slope) > 1e-4 {
			t.Errorf("slope of %v = %.4f, want %.4f", tc.values, got, tc.slope)
		}
	}
	first, second := Sample{Values: []float64{1, 2, 3, 4, 5}, Unit: "s"}.Halves()
	if len(first.Values) != 2 || first.Values[1] != 2 || len(second.Values) != 2 || second.Values[0] != 4 || second.Unit != "s" {
		t.Errorf("halves of 1..5 = %v, %v", first, second)
	}
}

func TestPercentile(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(100 - i) // 100, 99, ..., 1: unsorted on purpose
	}
	// 150 creates with one outlier: p99 is the second largest, not the outlier.
	creates := make([]float64, 150)
	for i := range creates {
		creates[i] = float64(i + 1)
	}
	creates[149] = 1000
	for _, tc := range []struct {
		values []float64
		p      float64
		want   float64
	}{
		{hundred, 50, 50},
		{hundred, 99, 99},
		{hundred, 100, 100},
		{hundred, 1, 1},
		{[]float64{3, 1, 2}, 50, 2},
		{[]float64{3, 1, 2}, 99, 3},
		{[]float64{7}, 99, 7},
		{creates, 99, 149},
		{creates, 50, 75},
	} {
		if got := (Sample{Values: tc.values}).Percentile(tc.p); got != tc.want {
			t.Errorf("p%v of %d runs = %v, want %v", tc.p, len(tc.values), got, tc.want)
		}
	}
	if hundred[0] != 100 {
		t.Error("Percentile sorted the caller's values")
	}
	for _, tc := range []struct {
		s Sample
		p float64
	}{{Sample{}, 50}, {Sample{Values: []float64{1}}, 0}, {Sample{Values: []float64{1}}, 101}} {
		if got := tc.s.Percentile(tc.p); !math.IsNaN(got) {
			t.Errorf("p%v of %v = %v, want NaN", tc.p, tc.s.Values, got)
		}
	}
	if got := format(12.34, "ms"); got != "12.3 ms" {
		t.Errorf("format ms = %q", got)
	}
}

func TestProcKBFieldsMB(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(path, []byte("MemTotal:       24576000 kB\nMemFree:  1 kB\nMemAvailable:   12288000 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := procKBFieldsMB(path, "MemAvailable", "MemTotal")
	if err != nil || len(got) != 2 || got[0] != 12000 || got[1] != 24000 {
		t.Fatalf("procKBFieldsMB = %v, %v; want [12000 24000] MB in the order asked", got, err)
	}
	if _, err := procKBFieldsMB(path, "VmRSS"); err == nil || !strings.Contains(err.Error(), "has no VmRSS") {
		t.Fatalf("a missing field: %v; want an error naming it", err)
	}
}
