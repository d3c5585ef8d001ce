package monitoring_test

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// targetMetrics are the series Prometheus makes of a scrape itself, not the
// operator's; the alert on a missing operator uses up.
var targetMetrics = []string{"up"}

// TestRulesAndDashboardNameExportedMetrics parses every PromQL expression of
// the rules and the dashboard and fails on a metric the operator does not
// export (a typo, or a metric renamed or removed in the operator).
func TestRulesAndDashboardNameExportedMetrics(t *testing.T) {
	exprs := map[string]string{}
	pr, _ := readRules(t)
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			exprs["alert "+r.Alert] = r.Expr
		}
	}
	for where, e := range dashboardExprs(t) {
		exprs[where] = e
	}
	if len(exprs) < 10 {
		t.Fatalf("found %d expressions in the rules and the dashboard, want more: does the test still read them?", len(exprs))
	}
	for where, e := range exprs {
		names, err := metricNames(e)
		if err != nil {
			t.Errorf("%s: %v", where, err)
			continue
		}
		for _, n := range names {
			if !slices.Contains(targetMetrics, n) && !exported(n) {
				t.Errorf("%s names %s, which the operator does not export (see internal/operator/*/metrics.go)", where, n)
			}
		}
	}
}

// TestExportedKnowsWhatTheOperatorExports guards the check above: it must
// find metrics of each kind (the operator's, controller-runtime's, a
// histogram's series) and not made-up ones.
func TestExportedKnowsWhatTheOperatorExports(t *testing.T) {
	for name, want := range map[string]bool{
		"nodemaintenance_evictions_total":                              true,
		"nodemaintenance_maintenances":                                 true,
		"nodemaintenance_rollout_phase":                                true,
		"nodemaintenance_notifications_failed_total":                   true,
		"nodemaintenance_webhook_admissions_total":                     true,
		"controller_runtime_reconcile_errors_total":                    true,
		"controller_runtime_webhook_requests_total":                    true,
		"leader_election_master_status":                                true,
		"workqueue_depth":                                              true,
		"nodemaintenance_drain_duration_seconds_bucket":                true,
		"controller_runtime_reconcile_time_seconds_count":              true,
		"nodemaintenance_evictions":                                    false,
		"nodemaintenance_maintenance_phase":                            false,
		"nodemaintenance_notifications_failed_total_bucket":            false,
		"nodemaintenance_maintenance_running_since_timestamp_seconds_": false,
	} {
		if got := exported(name); got != want {
			t.Errorf("exported(%q) = %v, want %v", name, got, want)
		}
	}
}

// metricNames are the metric names an expression selects.
func metricNames(expr string) ([]string, error) {
	node, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == "__name__" {
					name = m.Value
				}
			}
			names = append(names, name)
		}
		return nil
	})
	return names, nil
}

// exported reports whether the operator exports a metric of that name: a
// collector registered in controller-runtime's registry describes it (a
// histogram's _bucket, _sum and _count series count as its name). A vector
// nothing has observed yet is not in a scrape, so the registry's
// descriptors are asked instead: registering a probe of the same name fails
// exactly when a registered collector already describes it (a duplicate, or
// the same name with other labels or help).
func exported(name string) bool {
	if registered(name) {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && registered(base) && !strings.HasSuffix(base, "_total") {
			return true
		}
	}
	return false
}

func registered(name string) bool {
	probe := probeCollector{prometheus.NewDesc(name, "probe of deploy/monitoring's tests", nil, nil)}
	if err := metrics.Registry.Register(probe); err != nil {
		return true
	}
	metrics.Registry.Unregister(probe)
	return false
}

type probeCollector struct{ desc *prometheus.Desc }

func (p probeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- p.desc }
func (p probeCollector) Collect(chan<- prometheus.Metric)    {}

// dashboard is the part of a Grafana dashboard these tests read.
type dashboard struct {
	Title  string  `json:"title"`
	UID    string  `json:"uid"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID      int     `json:"id"`
	Title   string  `json:"title"`
	Type    string  `json:"type"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func readDashboard(t *testing.T) (dashboard, []byte) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s is not JSON: %v", dashboardFile, err)
	}
	return d, b
}

var grafanaVariables = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// dashboardExprs are the expressions of every panel's targets, by panel.
func dashboardExprs(t *testing.T) map[string]string {
	d, _ := readDashboard(t)
	out := map[string]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for i, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("dashboard panel %q: target %d has no expression", p.Title, i)
				}
				// Grafana's range variables are no PromQL: a duration in their place.
				out["dashboard panel "+p.Title+" target "+string(rune('A'+i))] = grafanaVariables.Replace(tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// TestDashboardIsDeterministic: the dashboard is indented JSON (two spaces,
// as json.Indent writes it, with a final newline), so that a change to it is
// a readable diff; its panel ids are unique.
func TestDashboardIsDeterministic(t *testing.T) {
	d, b := readDashboard(t)
	var want bytes.Buffer
	if err := json.Indent(&want, bytes.TrimSpace(b), "", "  "); err != nil {
		t.Fatal(err)
	}
	want.WriteByte('\n')
	if !bytes.Equal(b, want.Bytes()) {
		t.Errorf("%s is not indented as json.Indent(..., \"\", \"  \") writes it (plus a final newline)", dashboardFile)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("the dashboard needs a uid and a title")
	}
	ids := map[int]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if prev, dup := ids[p.ID]; dup {
				t.Errorf("panels %q and %q share the id %d", prev, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			walk(p.Panels)
		}
	}
	walk(d.Panels)
}
