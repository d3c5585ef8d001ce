package e2e

// Notifications: rollouts send CloudEvents to their spec.notify, and the
// operator's --notify-url gets the events of every NodeMaintenance, each
// once, in order per object, retried while the receiver fails, and counted
// when it cannot be delivered.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/notify"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testoperator"
)

// A rollout of two nodes, the second held by someone else's maintenance
// for a while, sends each of its events once and in order to a receiver,
// with the bearer token of its secretRef (a Secret in the operator's
// namespace), and to one that answers 500 to its first requests (after
// retries), with the documented attributes and data.
func TestNotifyRolloutSendsEveryEventOnceInOrder(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook-token"}, Data: map[string][]byte{"token": []byte("r0llout")}}
	if err := c.Client.Create(bg(), secret); err != nil {
		t.Fatal(err)
	}
	o := defaultOptions()
	o.Namespace = ns
	restartOperator(t, c, o)
	_, nodes, _ := poolNodes(t, c, 2)
	theirs := testcluster.UniqueName(t, "theirs")
	createMaintenance(t, c, theirs, nodes[1], "someone else's")
	waitPhase(t, c, theirs, nmv1beta1.MaintenanceSucceeded)
	good, flaky := newCEReceiver(t, 0), newCEReceiver(t, 3)
	ro := newRollout(t, "notified", nmv1alpha1.NodeMaintenanceRolloutSpec{
		NodeNames: nodes, MaxUnavailable: ptr.To(intstr.FromInt32(2)),
		Notify: []nmv1alpha1.Notification{
			{URL: good.srv.URL, SecretRef: &nmv1alpha1.SecretKeyRef{Name: "hook-token", Key: "token"}},
			{URL: flaky.srv.URL + "/hook"},
		},
	})
	createRollout(t, c, ro)
	waitRollout(t, c, 2*time.Minute, ro.Name, "to finish its first node", func(ro *nmv1alpha1.NodeMaintenanceRollout) bool {
		return rowOf(ro, nodes[0]).State == nmv1alpha1.NodeDone
	})
	deleteMaintenance(t, c, theirs)
	done := waitRollout(t, c, 2*time.Minute, ro.Name, "to succeed", rolloutPhase(nmv1alpha1.RolloutSucceeded))

	source := notify.RolloutSource(ro.Name)
	want := []wantEvent{
		{notify.RolloutStarted, ""},
		{notify.RolloutBlocked, ""},
		{notify.RolloutNodeRestored, nodes[0]},
		{notify.RolloutNodeDone, nodes[0]},
		{notify.RolloutNodeRestored, nodes[1]},
		{notify.RolloutNodeDone, nodes[1]},
		{notify.RolloutSucceeded, ""},
	}
	for r, auth := range map[*ceReceiver]string{good: "Bearer r0llout", flaky: ""} {
		got := r.waitEvents(t, source, len(want))
		assertEvents(t, got, want)
		assertRolloutData(t, got, done, theirs)
		for _, e := range got {
			if e.authorization != auth {
				t.Errorf("%s came with authorization %q, want %q", e.Type, e.authorization, auth)
			}
		}
	}
	if flaky.attempts() <= len(want) {
		t.Errorf("the failing receiver was asked %d times for %d events: no retry", flaky.attempts(), len(want))
	}
}

// wantEvent is an expected event: its type and subject.
type wantEvent struct{ typ, subject string }

// assertEvents: got is want, in order, each with a unique id and the
// CloudEvents attributes of structured JSON.
func assertEvents(t *testing.T, got []ceEvent, want []wantEvent) {
	t.Helper()
	ids := map[string]bool{}
	for i, e := range got {
		if i >= len(want) || e.Type != want[i].typ || e.Subject != want[i].subject {
			t.Fatalf("events %s, want %v", describeEvents(got), want)
		}
		if e.SpecVersion != "1.0" || e.DataContentType != "application/json" || e.ID == "" || ids[e.ID] || e.Time == "" || e.contentType != "application/cloudevents+json" {
			t.Errorf("event %d: %+v: want specversion 1.0, datacontenttype application/json, a unique id, a time, structured mode", i, e)
		}
		ids[e.ID] = true
	}
}

// assertRolloutData checks the documented data of a rollout's events.
func assertRolloutData(t *testing.T, got []ceEvent, done *nmv1alpha1.NodeMaintenanceRollout, theirs string) {
	t.Helper()
	for _, e := range got {
		var d notify.RolloutData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("data of %s: %v", e.Type, err)
		}
		if d.Rollout != done.Name || d.Node != e.Subject || d.Total != 2 || d.Phase == "" || d.Event == "" || notify.RolloutTypes[d.Event] != e.Type {
			t.Errorf("data of %s: %+v", e.Type, d)
		}
		switch e.Type {
		case notify.RolloutBlocked:
			if len(d.Blockers) != 1 || !strings.Contains(d.Blockers[0], "waits for NodeMaintenance "+theirs) {
				t.Errorf("blocked names %q, want the node waiting for %s", d.Blockers, theirs)
			}
		case notify.RolloutSucceeded:
			if d.Phase != nmv1alpha1.RolloutSucceeded || d.Done != 2 || d.Message != done.Status.Message {
				t.Errorf("succeeded carries %+v, want phase Succeeded, 2 done and the status message", d)
			}
		}
	}
}

// A receiver that is down holds nothing: the rollout succeeds, and the
// events it could not take are counted as failed.
func TestNotifyReceiverDownDoesNotHoldTheRollout(t *testing.T) {
	c := testcluster.Get(t)
	_, nodes, _ := poolNodes(t, c, 1)
	port, err := testoperator.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	before := failedNotifications(t, notify.RolloutStarted)
	ro := newRollout(t, "unheard", nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: nodes,
		Notify: []nmv1alpha1.Notification{{URL: fmt.Sprintf("http://127.0.0.1:%d/down", port), Events: []nmv1alpha1.NotificationEvent{nmv1alpha1.EventStarted}}}})
	createRollout(t, c, ro)
	waitRollout(t, c, 2*time.Minute, ro.Name, "to succeed", rolloutPhase(nmv1alpha1.RolloutSucceeded))
	testcluster.WaitFor(t, 2*time.Minute, "the started event to be counted as failed", func(context.Context) (bool, error) {
		return failedNotifications(t, notify.RolloutStarted) > before, nil
	})
}

// failedNotifications reads nodemaintenance_notifications_failed_total of
// an event type from the operator's metrics endpoint.
func failedNotifications(t *testing.T, eventType string) float64 {
	t.Helper()
	return metricValue(t, fmt.Sprintf(`nodemaintenance_notifications_failed_total{event=%q}`, eventType))
}

// metricValue is the value of a series of the operator's metrics endpoint,
// 0 while it has none.
func metricValue(t *testing.T, series string) float64 {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(scrape(t, operator.MetricsURL)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", sc.Text(), err)
			}
			return f
		}
	}
	return 0
}

// The operator's --notify-url gets the events of every NodeMaintenance,
// with the bearer token of --notify-token-file: a maintenance held by a
// budget sends started, blocked once however many rounds the budget
// refuses, succeeded once the budget is gone, and restored.
func TestNotifyURLFlagSendsMaintenanceEvents(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t)
	r := newCEReceiver(t, 0)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := defaultOptions()
	o.NotifyURLs, o.NotifyTokenFile = []string{r.srv.URL}, token
	restartOperator(t, c, o)
	node := deploymentNode(t, c, ns, "held", 2, ptr.To(intstr.FromInt32(2)), nil)

	name := testcluster.UniqueName(t, "notified")
	createMaintenance(t, c, name, node, "")
	source := notify.MaintenanceSource(name)
	r.waitEvents(t, source, 2)
	// Let the budget refuse two more rounds of both pods: no second blocked
	// event follows (waitEvents fails on one).
	const refusals = `nodemaintenance_evictions_total{result="blocked"}`
	blocked := metricValue(t, refusals)
	testcluster.WaitFor(t, time.Minute, "two more rounds refused", func(context.Context) (bool, error) {
		return metricValue(t, refusals) >= blocked+4, nil
	})
	r.waitEvents(t, source, 2)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held"}}
	if err := c.Client.Delete(bg(), pdb); err != nil {
		t.Fatal(err)
	}
	waitPhase(t, c, name, nmv1beta1.MaintenanceSucceeded)
	deleteMaintenance(t, c, name)
	got := r.waitEvents(t, source, 4)
	assertEvents(t, got, []wantEvent{
		{notify.MaintenanceStarted, node}, {notify.MaintenanceBlocked, node}, {notify.MaintenanceSucceeded, node}, {notify.MaintenanceRestored, node},
	})
	for _, e := range got {
		var d notify.MaintenanceData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Maintenance != name || d.Node != node || e.authorization != "Bearer s3cret" {
			t.Errorf("%s: data %+v, authorization %q", e.Type, d, e.authorization)
		}
		switch e.Type {
		case notify.MaintenanceBlocked:
			if want := "PodDisruptionBudget " + ns + "/held"; len(d.Blockers) != 1 || d.Blockers[0] != want || !strings.Contains(d.Reason, "held") {
				t.Errorf("blocked: blockers %q, reason %q; want [%s] and the lastError", d.Blockers, d.Reason, want)
			}
		case notify.MaintenanceSucceeded:
			if d.Phase != nmv1beta1.MaintenanceSucceeded || d.EvictionPods != 2 || d.DrainProgress != 100 {
				t.Errorf("succeeded: %+v", d)
			}
		}
	}
}

// ceEvent is a CloudEvent as a receiver got it, in structured mode.
type ceEvent struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Type            string          `json:"type"`
	Source          string          `json:"source"`
	Subject         string          `json:"subject"`
	Time            string          `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	Data            json.RawMessage `json:"data"`

	contentType, authorization string
}

// ceReceiver is an HTTP endpoint in the test process that records the
// events it accepts; it answers 500 to its first failFirst requests.
type ceReceiver struct {
	srv       *httptest.Server
	failFirst int

	mu       sync.Mutex
	requests int
	events   []ceEvent
}

func newCEReceiver(t *testing.T, failFirst int) *ceReceiver {
	r := &ceReceiver{failFirst: failFirst}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *ceReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	if r.requests <= r.failFirst {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	var e ceEvent
	if err := json.Unmarshal(body, &e); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	e.contentType, e.authorization = req.Header.Get("Content-Type"), req.Header.Get("Authorization")
	r.events = append(r.events, e)
	w.WriteHeader(http.StatusAccepted)
}

func (r *ceReceiver) attempts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

func (r *ceReceiver) of(source string) []ceEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ceEvent
	for _, e := range r.events {
		if e.Source == source {
			out = append(out, e)
		}
	}
	return out
}

// waitEvents waits until the receiver has n events of source, and fails
// if it gets more.
func (r *ceReceiver) waitEvents(t *testing.T, source string, n int) []ceEvent {
	t.Helper()
	var got []ceEvent
	testcluster.WaitFor(t, 2*time.Minute, fmt.Sprintf("%d events of %s", n, source), func(context.Context) (bool, error) {
		got = r.of(source)
		return len(got) >= n, nil
	})
	if len(got) > n {
		t.Fatalf("%d events of %s, more than %d: %s", len(got), source, n, describeEvents(got))
	}
	return got
}

func describeEvents(events []ceEvent) string {
	var s []string
	for _, e := range events {
		s = append(s, strings.TrimPrefix(e.Type, "io.nodemaintenance.")+" "+e.Subject)
	}
	return "[" + strings.Join(s, ", ") + "]"
}
