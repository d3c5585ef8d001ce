package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// Bad safety settings are refused at plan time, each naming its attribute
// in the resource's words, by the rules the webhook applies: nothing is
// created.
func TestAccRolloutRefusesBadSafetySettings(t *testing.T) {
	window := func(days, start, end, zone string) string {
		return fmt.Sprintf("window = { days = %s, start = %q, end = %q, time_zone = %q }", days, start, end, zone)
	}
	gate := func(url, query string) string {
		return fmt.Sprintf("gates = { prometheus = { url = %q, query = %q } }", url, query)
	}
	cases := []struct {
		name, attr string
		want       *regexp.Regexp
	}{
		{"unknown time zone", window(`["Mon"]`, "22:00", "04:00", "Mars/Olympus_Mons"), regexp.MustCompile(`window\.time_zone[\s\S]*Mars/Olympus_Mons`)},
		{"window without days", window(`[]`, "22:00", "04:00", "UTC"), regexp.MustCompile(`window\.days`)},
		{"unknown day", window(`["Funday"]`, "22:00", "04:00", "UTC"), regexp.MustCompile(`window\.days[\s\S]*Funday`)},
		{"start not HH:MM", window(`["Mon"]`, "10pm", "04:00", "UTC"), regexp.MustCompile(`window\.start[\s\S]*10pm`)},
		{"gate URL not http", gate("ftp://prometheus:9090", "up == 0"), regexp.MustCompile(`gates\.prometheus\.url[\s\S]*ftp://prometheus:9090`)},
		// Prometheus's own parser error: its position and its words.
		{"query does not parse", gate("http://prometheus:9090", "sum(up"), regexp.MustCompile(`gates\.prometheus\.query[\s\S]*unclosed\s+left\s+parenthesis`)},
		{"notify URL without a scheme", `notify = [{ url = "hooks.example.com/nm" }]`, regexp.MustCompile(`notify\[0\]\.url[\s\S]*hooks\.example\.com/nm`)},
	}
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		for _, tc := range cases {
			t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
				name := testcluster.UniqueName(t, "bad")
				resource.Test(t, resource.TestCase{
					ProtoV6ProviderFactories: providerFactories,
					Steps: []resource.TestStep{{
						Config:      rolloutConfig(c, name, `node_names = ["nobody"]`, tc.attr),
						PlanOnly:    true,
						ExpectError: tc.want,
					}},
				})
				if err := c.Client.Get(context.Background(), client.ObjectKey{Name: name}, &nmv1alpha1.NodeMaintenanceRollout{}); err == nil {
					t.Errorf("rollout %s was created", name)
				}
			})
		}
	})
}

// With wait_for_completion = false, apply returns as soon as the operator
// accepted the rollout, although its window is closed: the state says when
// the window opens and what holds the nodes, no node is touched, and the
// data source reads the same. Opened, with wait_for_completion back on, an
// update in place waits until every node is done.
func TestAccRolloutWaitForCompletionFalseWithAClosedWindow(t *testing.T) {
	eachCLI(t, func(t *testing.T, c *testcluster.Cluster) {
		pool := c.NewPool(t)
		nodes := []string{pool.AddNode(t, "").Name, pool.AddNode(t, "").Name}
		name := testcluster.UniqueName(t, "night")
		// The window opens the day after tomorrow, UTC, for a minute: closed
		// now, whenever the test runs.
		opens := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 2)
		closed := fmt.Sprintf(`window = { days = [%q], start = "00:00", end = "00:01" }`, opens.Weekday().String())
		always := `window = { days = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"], start = "00:00", end = "00:00" }`
		base := []string{fmt.Sprintf("node_selector = %q", testcluster.PoolLabel+"="+pool.Value), `hold_for = "1s"`, `recovery_gate = "NodeReady"`}
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: providerFactories,
			CheckDestroy:             rolloutGone(c, name, nodes...),
			Steps: []resource.TestStep{
				{
					Config: rolloutConfig(c, name, append(base, closed, `wait_for_completion = false`)...) + rolloutDataSource,
					ConfigStateChecks: []statecheck.StateCheck{
						phaseIs("Progressing"),
						statecheck.ExpectKnownValue("nodemaintenance_rollout.this", tfjsonpath.New("next_window_start"),
							knownvalue.StringExact(opens.Format(time.RFC3339))),
						statecheck.ExpectKnownValue("nodemaintenance_rollout.this", tfjsonpath.New("blockers"),
							knownvalue.ListPartial(map[int]knownvalue.Check{0: knownvalue.StringRegexp(regexp.MustCompile(`window`))})),
						nodeRow(0, "state", knownvalue.StringExact("Waiting")), nodeRow(1, "state", knownvalue.StringExact("Waiting")),
						statecheck.ExpectKnownValue("data.nodemaintenance_rollout.this", tfjsonpath.New("next_window_start"),
							knownvalue.StringExact(opens.Format(time.RFC3339))),
					},
					Check: untouched(c, nodes...),
				},
				{
					Config:            rolloutConfig(c, name, append(base, always)...) + rolloutDataSource,
					ConfigStateChecks: []statecheck.StateCheck{phaseIs("Succeeded"), nodeRow(1, "state", knownvalue.StringExact("Done"))},
					Check:             allSchedulable(c, nodes...),
				},
			},
		})
	})
}

// untouched checks that no node is cordoned.
func untouched(c *testcluster.Cluster, nodes ...string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		for _, n := range nodes {
			node := &corev1.Node{}
			if err := c.Client.Get(context.Background(), client.ObjectKey{Name: n}, node); err != nil {
				return err
			}
			if node.Spec.Unschedulable {
				return fmt.Errorf("node %s was cordoned while the window was closed", n)
			}
		}
		return nil
	}
}
