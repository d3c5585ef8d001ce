// Package monitoring_test checks the alert rules and the dashboard shipped
// in deploy/monitoring: promtool's own checks and unit tests of the rules,
// and that every metric they name is one the operator exports, so that a
// renamed metric fails the build instead of silencing an alert.
package monitoring_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"

	// The operator as the binary builds it: importing it registers every
	// metric it exports in controller-runtime's registry, its own and
	// controller-runtime's (workqueue, reconcile, webhook, leader election).
	_ "github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/manager"
)

const (
	rulesFile     = "prometheus-rules.yaml"
	rulesTestFile = "prometheus-rules.test.yaml"
	dashboardFile = "grafana-dashboard.json"
)

// prometheusRule is the part of a PrometheusRule these tests read.
type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

func readRules(t *testing.T) (prometheusRule, []byte) {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var pr prometheusRule
	if err := yaml.UnmarshalStrict(b, &pr, yaml.DisallowUnknownFields); err != nil {
		t.Fatalf("%s is not a PrometheusRule these tests understand: %v", rulesFile, err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Fatalf("%s is a %s %s, want a monitoring.coreos.com/v1 PrometheusRule", rulesFile, pr.APIVersion, pr.Kind)
	}
	// promtool reads plain rule groups: the spec, whole (not the struct
	// above, which may leave fields out).
	var whole map[string]any
	if err := yaml.Unmarshal(b, &whole); err != nil {
		t.Fatal(err)
	}
	spec, err := yaml.Marshal(whole["spec"])
	if err != nil {
		t.Fatal(err)
	}
	return pr, spec
}

// TestAlertRules runs promtool check rules and promtool test rules (the
// cases of prometheus-rules.test.yaml) on the PrometheusRule's groups. It
// needs promtool from `make tools`: it skips only where no tool was ever
// built, and fails where the toolchain is there without promtool, so that
// `make test` (which builds the tools first) always runs it.
func TestAlertRules(t *testing.T) {
	promtool, err := testcluster.Tool("promtool")
	if err != nil {
		if _, statErr := os.Stat(testcluster.ToolsBinDir()); errors.Is(statErr, os.ErrNotExist) {
			t.Skipf("needs promtool: run `hack/tools.sh promtool` (or `make tools`) first; %v", err)
		}
		t.Fatal(err)
	}
	_, spec := readRules(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	cases, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, rulesTestFile), cases, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", rulesTestFile}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestEveryAlertIsTested: each alert has a for, a severity, a summary, a
// description and a runbook_url, and prometheus-rules.test.yaml has a case
// where it fires.
func TestEveryAlertIsTested(t *testing.T) {
	pr, _ := readRules(t)
	cases, err := os.ReadFile(rulesTestFile)
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(cases, &tests); err != nil {
		t.Fatal(err)
	}
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			fires[a.Alertname] = fires[a.Alertname] || len(a.ExpAlerts) > 0
		}
	}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if r.For == "" || r.Labels["severity"] == "" {
				t.Errorf("alert %s needs a for and a severity label", r.Alert)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("alert %s has no %s annotation", r.Alert, a)
				}
			}
			if !fires[r.Alert] {
				t.Errorf("alert %s has no case in %s where it fires", r.Alert, rulesTestFile)
			}
		}
	}
}
