package validation

import (
	"strings"
	"testing"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

func withGates(r *v1alpha1.NodeMaintenanceRollout) *v1alpha1.NodeMaintenanceRollout {
	r.Spec.Window = &v1alpha1.MaintenanceWindow{Days: []string{"Sat", "sunday"}, Start: "22:00", End: "04:00", TimeZone: "Europe/Berlin"}
	r.Spec.Gates = &v1alpha1.RolloutGates{Prometheus: &v1alpha1.PrometheusGate{
		URL: "http://prometheus.monitoring:9090", Query: `ALERTS{alertstate="firing",severity="critical"}`}}
	return r
}

func TestValidateRolloutAdmitsWindowsAndGates(t *testing.T) {
	for _, tt := range []struct {
		name   string
		modify func(*v1alpha1.NodeMaintenanceRollout)
	}{
		{"a window and a gate", func(*v1alpha1.NodeMaintenanceRollout) {}},
		{"every day, all day, UTC by default", func(r *v1alpha1.NodeMaintenanceRollout) {
			r.Spec.Window = &v1alpha1.MaintenanceWindow{Days: []string{"MON", "Tue", "wednesday", "thu", "Fri", "sat", "Sun"}, Start: "00:00", End: "00:00"}
		}},
		{"https with a path", func(r *v1alpha1.NodeMaintenanceRollout) {
			r.Spec.Gates.Prometheus.URL = "https://mon.example.com/prometheus/"
		}},
		{"an expression of series", func(r *v1alpha1.NodeMaintenanceRollout) {
			r.Spec.Gates.Prometheus.Query = `sum by (alertname) (ALERTS{alertstate="firing"}) > 0 or absent(up{job="apiserver"} == 1)`
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := withGates(validRollout())
			tt.modify(r)
			if err := ValidateRollout(r, false); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

func TestValidateRolloutRefusesBadWindowsAndGates(t *testing.T) {
	for _, tt := range []struct {
		name   string
		modify func(*v1alpha1.NodeMaintenanceRollout)
		want   string
	}{
		{"unknown zone", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Window.TimeZone = "Europe/Atlantis" },
			`spec.window.timeZone "Europe/Atlantis" is not a known IANA time zone`},
		{"Local zone", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Window.TimeZone = "Local" },
			`spec.window.timeZone "Local" is not a known IANA time zone`},
		{"no days", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Window.Days = nil },
			"spec.window.days is empty: list the days the window starts on"},
		{"unknown day", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Window.Days = []string{"Sat", "Caturday"} },
			`spec.window.days[1] "Caturday" is not a day of the week`},
		{"two-letter day", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Window.Days = []string{"Sa"} },
			`spec.window.days[0] "Sa" is not a day of the week`},
		{"start without leading zero", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Window.Start = "9:00" },
			`spec.window.start "9:00" is not a time of day as HH:MM`},
		{"start 24:00", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Window.Start = "24:00" },
			`spec.window.start "24:00" is not a time of day as HH:MM`},
		{"end with seconds", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Window.End = "04:00:00" },
			`spec.window.end "04:00:00" is not a time of day as HH:MM`},
		{"end empty", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Window.End = "" },
			`spec.window.end "" is not a time of day as HH:MM`},
		{"gate URL without scheme", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Gates.Prometheus.URL = "prometheus.monitoring:9090" },
			`spec.gates.prometheus.url "prometheus.monitoring:9090" is not an http or https URL`},
		{"gate URL not http", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Gates.Prometheus.URL = "ftp://prometheus/" },
			`spec.gates.prometheus.url "ftp://prometheus/" is not an http or https URL`},
		{"gate URL without host", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Gates.Prometheus.URL = "http:///api" },
			`spec.gates.prometheus.url "http:///api" has no host`},
		{"gate URL relative", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Gates.Prometheus.URL = "/prometheus" },
			`spec.gates.prometheus.url "/prometheus" is not an http or https URL`},
		{"gate URL with a query", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Gates.Prometheus.URL = "http://p:9090/?x=1" },
			`spec.gates.prometheus.url "http://p:9090/?x=1" has a query or fragment`},
		{"query that does not parse", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Gates.Prometheus.Query = `ALERTS{alertstate="firing"` },
			`spec.gates.prometheus.query "ALERTS{alertstate=\"firing\"" does not parse as PromQL: 1:27: parse error: unexpected end of input inside braces`},
		{"query with an unknown function", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Gates.Prometheus.Query = `rate_of(up[5m])` },
			`does not parse as PromQL: 1:1: parse error: unknown function with name "rate_of"`},
		{"empty query", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Gates.Prometheus.Query = " " },
			"spec.gates.prometheus.query is empty"},
		{"scalar query", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Gates.Prometheus.Query = "1 + 1" },
			`spec.gates.prometheus.query "1 + 1" returns a scalar, not an instant vector`},
		{"range query", func(r *v1alpha1.NodeMaintenanceRollout) { r.Spec.Gates.Prometheus.Query = "up[5m]" },
			`spec.gates.prometheus.query "up[5m]" returns a matrix, not an instant vector`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := withGates(validRollout())
			tt.modify(r)
			assertOneProblem(t, ValidateRollout(r, false), tt.want)
		})
	}
}

// The window and the gate may change while the rollout runs (a closed
// window opened by hand), within the same rules.
func TestValidateRolloutUpdateChecksWindowAndGate(t *testing.T) {
	oldR := withGates(validRollout())
	newR := withGates(validRollout())
	newR.Spec.Window.Days, newR.Spec.Gates.Prometheus.Query = []string{"Mon"}, "up == 0"
	if err := ValidateRolloutUpdate(oldR, newR); err != nil {
		t.Fatalf("refused: %v", err)
	}
	newR.Spec.Window.TimeZone = "Nowhere/Special"
	if err := ValidateRolloutUpdate(oldR, newR); err == nil || !strings.Contains(err.Error(), "spec.window.timeZone") {
		t.Fatalf("got %v, want the time zone refused", err)
	}
}
