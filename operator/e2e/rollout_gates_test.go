package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1/window"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// windowAround is a window of one day that is open now (from an hour ago
// to three hours on) in zone, or, with closed, one that opens in six hours
// and lasts an hour; and its parse.
func windowAround(t *testing.T, zone string, closed bool) (*nmv1alpha1.MaintenanceWindow, *window.Window) {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().In(loc)
	start, end := now.Add(-time.Hour), now.Add(3*time.Hour)
	if closed {
		start, end = now.Add(6*time.Hour), now.Add(7*time.Hour)
	}
	spec := &nmv1alpha1.MaintenanceWindow{Days: []string{strings.ToLower(start.Weekday().String())},
		Start: start.Format("15:04"), End: end.Format("15:04"), TimeZone: zone}
	w, err := window.New(spec.Days, spec.Start, spec.End, spec.TimeZone)
	if err != nil {
		t.Fatal(err)
	}
	if w.Open(time.Now()) == closed {
		t.Fatalf("window %s: open %v now, the test wants %v", w, !closed, !closed)
	}
	return spec, w
}

// waitGated waits until the rollout's Gated condition is True with reason,
// and checks that no node started meanwhile.
func waitGated(t *testing.T, c *testcluster.Cluster, name, reason string) (*nmv1alpha1.NodeMaintenanceRollout, *metav1.Condition) {
	t.Helper()
	ro := waitRollout(t, c, time.Minute, name, "to be gated ("+reason+")", func(ro *nmv1alpha1.NodeMaintenanceRollout) bool {
		cond := meta.FindStatusCondition(ro.Status.Conditions, nmv1alpha1.RolloutConditionGated)
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == reason && cond.ObservedGeneration == ro.Generation
	})
	assertNothingStarted(t, c, ro)
	return ro, meta.FindStatusCondition(ro.Status.Conditions, nmv1alpha1.RolloutConditionGated)
}

func assertNothingStarted(t *testing.T, c *testcluster.Cluster, ro *nmv1alpha1.NodeMaintenanceRollout) {
	t.Helper()
	for _, row := range ro.Status.Nodes {
		if row.State != nmv1alpha1.NodeWaiting || row.StartedAt != nil {
			t.Errorf("node %s started while the rollout was gated: %+v", row.Name, row)
		}
	}
	if children := childrenOf(t, c, ro.Name); len(children) != 0 {
		t.Errorf("%d NodeMaintenances exist while the rollout is gated", len(children))
	}
}

func TestRolloutWindowOpenNowFinishes(t *testing.T) {
	c := testcluster.Get(t)
	_, nodes, before := poolNodes(t, c, 2)
	spec, _ := windowAround(t, "Asia/Tokyo", false)
	ro := newRollout(t, "window-open", nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: nodes, Window: spec})
	createRollout(t, c, ro)
	done := waitRollout(t, c, 2*time.Minute, ro.Name, "to succeed inside its window", rolloutPhase(nmv1alpha1.RolloutSucceeded))
	if done.Status.NextWindowStart != nil || len(done.Status.Blockers) != 0 {
		t.Errorf("inside the window: nextWindowStart %s, blockers %q", done.Status.NextWindowStart, done.Status.Blockers)
	}
	assertRestoredAll(t, c, before)
}

// A window closed now holds every node and says when it opens; opened (the
// window is mutable), the rollout finishes.
func TestRolloutWindowClosedNowHoldsUntilChanged(t *testing.T) {
	c := testcluster.Get(t)
	_, nodes, before := poolNodes(t, c, 2)
	spec, w := windowAround(t, "America/New_York", true)
	next := w.Next(time.Now())
	ro := newRollout(t, "window-closed", nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: nodes, Window: spec})
	createRollout(t, c, ro)
	gated, cond := waitGated(t, c, ro.Name, "OutsideWindow")
	if gated.Status.NextWindowStart == nil || !gated.Status.NextWindowStart.Time.Equal(next) {
		t.Errorf("status.nextWindowStart %v, want %s", gated.Status.NextWindowStart, next.UTC())
	}
	for what, text := range map[string]string{"Gated message": cond.Message, "blockers": strings.Join(gated.Status.Blockers, "; "), "message": gated.Status.Message} {
		if !strings.Contains(text, w.String()) || !strings.Contains(text, next.UTC().Format("2006-01-02 15:04 UTC")) {
			t.Errorf("%s %q does not name the window %s and its next start %s", what, text, w, next.UTC())
		}
	}
	open, _ := windowAround(t, "Europe/Berlin", false)
	latest := getRollout(t, c, ro.Name)
	patch := client.MergeFrom(latest.DeepCopy())
	latest.Spec.Window = open
	if err := c.Client.Patch(bg(), latest, patch); err != nil {
		t.Fatalf("open the window of rollout %s: %v", ro.Name, err)
	}
	done := waitRollout(t, c, 2*time.Minute, ro.Name, "to succeed once its window is open", rolloutPhase(nmv1alpha1.RolloutSucceeded))
	if done.Status.NextWindowStart != nil {
		t.Errorf("nextWindowStart %s after the window opened", done.Status.NextWindowStart)
	}
	assertRestoredAll(t, c, before)
}

// firingQuery is the gate of the Prometheus tests: the alert of
// nodeTroubleRule, firing.
const firingQuery = `ALERTS{alertname="NodeTrouble",alertstate="firing"}`

const nodeTroubleRule = `groups:
  - name: test
    rules:
      - alert: NodeTrouble
        expr: test_trouble > 0
        for: 0s
`

// troubleTarget serves the gauge test_trouble for Prometheus to scrape.
func troubleTarget(t *testing.T) (prometheus.Gauge, string) {
	reg := prometheus.NewRegistry()
	trouble := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_trouble", Help: "1 while the test says a node is in trouble."})
	reg.MustRegister(trouble)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return trouble, strings.TrimPrefix(srv.URL, "http://")
}

// waitAlerts waits until Prometheus's answer to query has n series.
func waitAlerts(t *testing.T, p *testcluster.Prometheus, query string, n int) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	testcluster.WaitFor(t, time.Minute, fmt.Sprintf("Prometheus to return %d series for %s", n, query), func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/api/v1/query?query="+url.QueryEscape(query), nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return false, nil
		}
		defer resp.Body.Close()
		var a struct {
			Data struct {
				Result []json.RawMessage `json:"result"`
			} `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
			return false, err
		}
		return len(a.Data.Result) == n, nil
	})
}

// An alert that fires holds every node; cleared, the rollout finishes.
func TestRolloutPrometheusGateHoldsWhileTheAlertFires(t *testing.T) {
	c := testcluster.Get(t)
	_, nodes, before := poolNodes(t, c, 2)
	trouble, target := troubleTarget(t)
	trouble.Set(1)
	p := testcluster.StartPrometheus(t, testcluster.PrometheusOptions{Targets: []string{target}, Rules: nodeTroubleRule})
	waitAlerts(t, p, firingQuery, 1)
	ro := newRollout(t, "alert", nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: nodes,
		Gates: &nmv1alpha1.RolloutGates{Prometheus: &nmv1alpha1.PrometheusGate{URL: p.URL, Query: firingQuery}}})
	createRollout(t, c, ro)
	gated, cond := waitGated(t, c, ro.Name, "AlertFiring")
	if !strings.Contains(cond.Message, firingQuery) || !strings.Contains(cond.Message, `alertname="NodeTrouble"`) ||
		!strings.Contains(strings.Join(gated.Status.Blockers, "; "), firingQuery) {
		t.Errorf("Gated message %q, blockers %q: want the query and the alert named", cond.Message, gated.Status.Blockers)
	}
	if gated.Status.NextWindowStart != nil {
		t.Errorf("nextWindowStart %s without a window", gated.Status.NextWindowStart)
	}
	trouble.Set(0)
	waitAlerts(t, p, firingQuery, 0)
	done := waitRollout(t, c, 2*time.Minute, ro.Name, "to succeed once the alert cleared", rolloutPhase(nmv1alpha1.RolloutSucceeded))
	if cond := meta.FindStatusCondition(done.Status.Conditions, nmv1alpha1.RolloutConditionGated); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Errorf("Gated %+v after the alert cleared, want False", cond)
	}
	assertRestoredAll(t, c, before)
}

// A Prometheus that cannot be reached holds every node: the rollout never
// proceeds blind.
func TestRolloutPrometheusGateUnreachableStartsNothing(t *testing.T) {
	c := testcluster.Get(t)
	_, nodes, _ := poolNodes(t, c, 2)
	port, err := testcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ro := newRollout(t, "unreachable", nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: nodes,
		Gates: &nmv1alpha1.RolloutGates{Prometheus: &nmv1alpha1.PrometheusGate{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Query: firingQuery}}})
	createRollout(t, c, ro)
	gated, cond := waitGated(t, c, ro.Name, "PrometheusUnreachable")
	if !strings.Contains(cond.Message, "connection refused") || !strings.Contains(cond.Message, firingQuery) {
		t.Errorf("Gated message %q: want the query and the refused connection", cond.Message)
	}
	if gated.Status.Phase != nmv1alpha1.RolloutProgressing {
		t.Errorf("phase %s, want Progressing (held, not halted)", gated.Status.Phase)
	}
}
