// Package bench measures the operator and the provider against `kubectl drain`
// and against the physical limit of the cluster (a minimal watch-driven evict
// loop), on one local cluster in one run. Every figure is the median of
// several runs with its spread, and targets are ratios measured in the same
// run, never absolute times: machines here are noisy. `make bench` runs the
// benchmarks of this package (bench_test.go) and writes the table that
// Results renders.
package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Sample is the runs of one side of a scenario, in the unit it measures.
type Sample struct {
	Values []float64
	Unit   string // "s", "ms", "MB", "cores", "req/pod"
}

// Median of the runs; NaN without runs.
func (s Sample) Median() float64 {
	if len(s.Values) == 0 {
		return math.NaN()
	}
	v := slices.Clone(s.Values)
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// Percentile is the nearest-rank p-th percentile of the runs (0 < p ≤ 100):
// the smallest run that at least p% of the runs do not exceed. NaN without
// runs.
func (s Sample) Percentile(p float64) float64 {
	if len(s.Values) == 0 || p <= 0 || p > 100 {
		return math.NaN()
	}
	v := slices.Clone(s.Values)
	slices.Sort(v)
	rank := int(math.Ceil(p / 100 * float64(len(v))))
	return v[max(rank, 1)-1]
}

// Spread is the smallest and the largest run.
func (s Sample) Spread() (lo, hi float64) {
	if len(s.Values) == 0 {
		return math.NaN(), math.NaN()
	}
	return slices.Min(s.Values), slices.Max(s.Values)
}

// Slope is the least-squares change per run, in the sample's unit: how much
// each run adds to the one before, when the runs are rounds in a row. Zero
// with fewer than two runs.
func (s Sample) Slope() float64 {
	n := float64(len(s.Values))
	if n < 2 {
		return 0
	}
	var sumX, sumY, sumXY, sumXX float64
	for i, y := range s.Values {
		x := float64(i)
		sumX, sumY, sumXY, sumXX = sumX+x, sumY+y, sumXY+x*y, sumXX+x*x
	}
	return (n*sumXY - sumX*sumY) / (n*sumXX - sumX*sumX)
}

// Halves are the sample's first and second half of runs (the middle run of
// an odd count in neither).
func (s Sample) Halves() (first, second Sample) {
	h := len(s.Values) / 2
	return Sample{Values: s.Values[:h], Unit: s.Unit}, Sample{Values: s.Values[len(s.Values)-h:], Unit: s.Unit}
}

// Seconds makes a sample of durations.
func Seconds(d []time.Duration) Sample {
	s := Sample{Unit: "s"}
	for _, x := range d {
		s.Values = append(s.Values, x.Seconds())
	}
	return s
}

// Row is one measured side of a scenario, with an optional target: Value
// (the median, or a ratio of medians) must be at most Max.
type Row struct {
	Scenario, Side string
	Sample         Sample
	// Ratio, when set, is what the target applies to instead of the median:
	// this side's median divided by Of's median.
	Ratio float64
	Of    string
	// Max is the target (on Ratio when set, else on the median); 0: none.
	Max float64
}

// Value is what the target applies to.
func (r Row) Value() float64 {
	if r.Of != "" {
		return r.Ratio
	}
	return r.Sample.Median()
}

// Met says whether the row meets its target; true without one.
func (r Row) Met() bool { return r.Max == 0 || r.Value() <= r.Max }

// Results renders rows as a markdown table.
func Results(rows []Row) string {
	var b strings.Builder
	b.WriteString("| scenario | side | median | spread (min–max) | runs | ratio | target | met |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|:---:|\n")
	for _, r := range rows {
		lo, hi := r.Sample.Spread()
		ratio, target, met := "", "", ""
		if r.Of != "" {
			ratio = fmt.Sprintf("%.2f× %s", r.Ratio, r.Of)
		}
		if r.Max != 0 {
			if r.Of != "" {
				target = fmt.Sprintf("≤ %.2f×", r.Max)
			} else {
				target = fmt.Sprintf("≤ %s", format(r.Max, r.Sample.Unit))
			}
			met = "yes"
			if !r.Met() {
				met = "**no**"
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s – %s | %d | %s | %s | %s |\n", r.Scenario, r.Side,
			format(r.Sample.Median(), r.Sample.Unit), format(lo, r.Sample.Unit), format(hi, r.Sample.Unit),
			len(r.Sample.Values), ratio, target, met)
	}
	return b.String()
}

func format(v float64, unit string) string {
	switch unit {
	case "s":
		return fmt.Sprintf("%.3f s", v)
	case "MB":
		return fmt.Sprintf("%.1f MB", v)
	case "ms":
		return fmt.Sprintf("%.1f ms", v)
	case "cores":
		return fmt.Sprintf("%.4f cores", v)
	default:
		return fmt.Sprintf("%.2f %s", v, unit)
	}
}
