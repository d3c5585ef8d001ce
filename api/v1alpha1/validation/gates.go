package validation

import (
	"fmt"
	"net/url"
	"strings"

	promparser "github.com/prometheus/prometheus/promql/parser"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1/window"
)

// windowProblems checks spec.window with the parser the operator reads it
// with, so that a window admitted is a window the operator understands.
func windowProblems(w *v1alpha1.MaintenanceWindow) Problems {
	if w == nil {
		return nil
	}
	var p Problems
	if len(w.Days) == 0 {
		p = append(p, "spec.window.days is empty: list the days the window starts on (e.g. [Sat, Sun]; every day: all seven)")
	}
	for i, d := range w.Days {
		if _, err := window.ParseDay(d); err != nil {
			p = append(p, fmt.Sprintf("spec.window.days[%d] %q is not a day of the week: use an English day name, full or three letters, any case (Monday, mon, SAT)", i, d))
		}
	}
	for _, c := range []struct{ field, value string }{{"spec.window.start", w.Start}, {"spec.window.end", w.End}} {
		if _, err := window.ParseClock(c.value); err != nil {
			p = append(p, fmt.Sprintf("%s %q is not a time of day as HH:MM, 24 hours: write e.g. 22:00 or 04:30", c.field, c.value))
		}
	}
	if _, err := window.LoadZone(w.TimeZone); err != nil {
		p = append(p, fmt.Sprintf("spec.window.timeZone %q is not a known IANA time zone: use a name of the tz database, e.g. Europe/Berlin, America/New_York or UTC (the default)", w.TimeZone))
	}
	return p
}

// prometheusProblems checks spec.gates.prometheus: an address the operator
// can query, and a query Prometheus can parse, with Prometheus's own parser.
func prometheusProblems(g *v1alpha1.RolloutGates) Problems {
	if g == nil || g.Prometheus == nil {
		return nil
	}
	var p Problems
	if msg := httpURLProblem(g.Prometheus.URL); msg != "" {
		p = append(p, fmt.Sprintf("spec.gates.prometheus.url %q %s: give the Prometheus server's base URL, e.g. http://prometheus.monitoring:9090", g.Prometheus.URL, msg))
	}
	q := g.Prometheus.Query
	switch expr, err := promparser.NewParser(promparser.Options{}).ParseExpr(q); {
	case strings.TrimSpace(q) == "":
		p = append(p, `spec.gates.prometheus.query is empty: give a PromQL query that returns no series while nodes may start, e.g. ALERTS{alertstate="firing",severity="critical"}`)
	case err != nil:
		p = append(p, fmt.Sprintf("spec.gates.prometheus.query %q does not parse as PromQL: %s", q, oneLine(err.Error())))
	case expr.Type() != promparser.ValueTypeVector:
		p = append(p, fmt.Sprintf("spec.gates.prometheus.query %q returns a %s, not an instant vector: the gate holds nodes while the query returns any series, so write a selector or an expression of series (e.g. ALERTS{alertstate=\"firing\"})", q, expr.Type()))
	}
	return p
}

// httpURLProblem says what keeps s from being an absolute http or https
// URL with a host, or "".
func httpURLProblem(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "is not a URL (" + err.Error() + ")"
	case u.Scheme != "http" && u.Scheme != "https":
		return "is not an http or https URL"
	case u.Host == "" || u.Hostname() == "":
		return "has no host"
	case u.RawQuery != "" || u.Fragment != "":
		return "has a query or fragment; the gate appends /api/v1/query?query=... itself"
	}
	return ""
}

// oneLine joins a multi-line error (the PromQL parser lists each error on
// its own line) into one sentence.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}
