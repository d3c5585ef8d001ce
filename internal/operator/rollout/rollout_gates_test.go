package rollout

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

// passAt runs one pass of rollout ro at the given clock and returns its
// result, the rollout as written and the children that exist.
func passAt(t *testing.T, c client.Client, at time.Time) (ctrl.Result, *nmv1alpha1.NodeMaintenanceRollout, []nmv1beta1.NodeMaintenance) {
	t.Helper()
	r := &RolloutReconciler{Client: c, APIReader: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), Now: func() time.Time { return at }}
	res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "ro"}})
	if err != nil {
		t.Fatal(err)
	}
	got := &nmv1alpha1.NodeMaintenanceRollout{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "ro"}, got); err != nil {
		t.Fatal(err)
	}
	children := &nmv1beta1.NodeMaintenanceList{}
	if err := c.List(context.Background(), children); err != nil {
		t.Fatal(err)
	}
	return res, got, children.Items
}

func windowRollout(t *testing.T, w *nmv1alpha1.MaintenanceWindow) client.Client {
	ro := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "ro", UID: "u1"},
		Spec: nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: []string{"n1", "n2"}, Window: w}}
	return fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ro, readyNode("n1"), readyNode("n2")).WithStatusSubresource(ro).WithIndex(&corev1.Pod{}, "spec.nodeName", podNode).Build()
}

// 2026-12-05 12:00 UTC (now) is a Saturday: a Monday-night window in
// Berlin holds the rollout until Monday 22:00 CET (21:00 UTC), then the
// first node starts.
func TestWindowGateHoldsTheNodesUntilItOpens(t *testing.T) {
	c := windowRollout(t, &nmv1alpha1.MaintenanceWindow{Days: []string{"mon"}, Start: "22:00", End: "04:00", TimeZone: "Europe/Berlin"})
	opens := time.Date(2026, 12, 7, 21, 0, 0, 0, time.UTC)
	res, _, children := passAt(t, c, now)
	res2, ro, children2 := passAt(t, c, now.Add(time.Second))
	if len(children)+len(children2) != 0 {
		t.Fatalf("children %v outside the window", children2)
	}
	cond := meta.FindStatusCondition(ro.Status.Conditions, nmv1alpha1.RolloutConditionGated)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != "OutsideWindow" {
		t.Fatalf("Gated %+v, want True/OutsideWindow", cond)
	}
	want := "outside the maintenance window (Mon 22:00-04:00 Europe/Berlin): it opens next on Mon 2026-12-07 22:00 CET (2026-12-07 21:00 UTC)"
	if cond.Message != want || len(ro.Status.Blockers) != 1 || ro.Status.Blockers[0] != want || !strings.Contains(ro.Status.Message, want) {
		t.Errorf("Gated message %q, blockers %q, message %q; want %q in each", cond.Message, ro.Status.Blockers, ro.Status.Message, want)
	}
	if ro.Status.NextWindowStart == nil || !ro.Status.NextWindowStart.Time.Equal(opens) {
		t.Errorf("nextWindowStart %v, want %s", ro.Status.NextWindowStart, opens)
	}
	for _, r := range []ctrl.Result{res, res2} {
		if r.RequeueAfter <= 0 || r.RequeueAfter > windowRetry {
			t.Errorf("requeue after %s, want at most %s", r.RequeueAfter, windowRetry)
		}
	}
	// Two minutes before the opening, the pass asks to be run at it.
	res, _, _ = passAt(t, c, opens.Add(-2*time.Minute))
	if res.RequeueAfter != 2*time.Minute {
		t.Errorf("requeue after %s two minutes before the opening", res.RequeueAfter)
	}
	_, ro, children = passAt(t, c, opens)
	if len(children) != 1 || children[0].Spec.NodeName != "n1" {
		t.Fatalf("children %v once the window is open, want n1's", children)
	}
	cond = meta.FindStatusCondition(ro.Status.Conditions, nmv1alpha1.RolloutConditionGated)
	if cond.Status != metav1.ConditionFalse || ro.Status.NextWindowStart != nil || len(ro.Status.Blockers) != 0 {
		t.Errorf("inside the window: Gated %+v, nextWindowStart %v, blockers %q", cond, ro.Status.NextWindowStart, ro.Status.Blockers)
	}
}

// A node started inside the window finishes after it closes; the next one
// waits for the next opening.
func TestWindowGateLetsANodeInProgressFinish(t *testing.T) {
	c := windowRollout(t, &nmv1alpha1.MaintenanceWindow{Days: []string{"Saturday"}, Start: "11:00", End: "12:00"})
	if _, _, children := passAt(t, c, now.Add(-time.Minute)); len(children) != 1 {
		t.Fatalf("children %v inside the window", children)
	}
	_, ro, children := passAt(t, c, now)
	if len(children) != 1 || ro.Status.Nodes[0].State != nmv1alpha1.NodeDraining {
		t.Fatalf("after the window closed: children %v, rows %+v; want n1 still Draining", children, ro.Status.Nodes)
	}
	// n1 out of the way: n2 could start, but the window is closed.
	if err := c.Delete(context.Background(), &children[0]); err != nil {
		t.Fatal(err)
	}
	ro.Status.Nodes[0].State = nmv1alpha1.NodeDone
	if err := c.Status().Update(context.Background(), ro); err != nil {
		t.Fatal(err)
	}
	_, ro, children = passAt(t, c, now.Add(time.Minute))
	if len(children) != 0 || ro.Status.Nodes[1].State != nmv1alpha1.NodeWaiting {
		t.Fatalf("children %v, rows %+v: n2 started outside the window", children, ro.Status.Nodes)
	}
	if want := time.Date(2026, 12, 12, 11, 0, 0, 0, time.UTC); !ro.Status.NextWindowStart.Time.Equal(want) {
		t.Errorf("nextWindowStart %s, want %s", ro.Status.NextWindowStart, want)
	}
}

func TestPrometheusAnswers(t *testing.T) {
	for _, tt := range []struct {
		name   string
		code   int
		body   string
		series int
		err    string
	}{
		{"success, no series", 200, `{"status":"success","data":{"resultType":"vector","result":[]}}`, 0, ""},
		{"success, two series", 200, `{"status":"success","data":{"resultType":"vector","result":[
			{"metric":{"alertstate":"firing","alertname":"NodeTrouble","__name__":"ALERTS"},"value":[1,"1"]},
			{"metric":{"alertname":"DiskFull"},"value":[1,"1"]}]}}`, 2, ""},
		{"error status", 400, `{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:1: parse error"}`, 0,
			`answered 400 with an error: bad_data: invalid parameter "query": 1:1: parse error`},
		{"error in a 200", 200, `{"status":"error","errorType":"execution","error":"query timed out"}`, 0, "answered 200 with an error: execution: query timed out"},
		{"a proxy's page", 502, "<html>\n<body>Bad Gateway</body></html>", 0, "answered 502 Bad Gateway: <html> <body>Bad Gateway</body></html>"},
		{"garbage", 200, "hello", 0, "is not the JSON of Prometheus's API"},
		{"a scalar", 200, `{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}`, 0, `is a "scalar", not a vector of series`},
		{"no status", 200, `{}`, 0, `has status "", not success`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/prom/api/v1/query" || r.URL.Query().Get("query") != `ALERTS{alertstate="firing"}` {
					t.Errorf("asked %s", r.URL)
				}
				w.WriteHeader(tt.code)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			g := &nmv1alpha1.PrometheusGate{URL: srv.URL + "/prom/", Query: `ALERTS{alertstate="firing"}`}
			series, err := queryPrometheus(context.Background(), srv.Client(), g)
			if tt.err == "" && (err != nil || len(series) != tt.series) {
				t.Fatalf("got %v, %v; want %d series", series, err, tt.series)
			}
			if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("got %v, %v; want an error with %q", series, err, tt.err)
			}
		})
	}
}

// The gate's states, against a server that answers as Prometheus does and
// one that is not there: closed unless the answer is a success without
// series.
func TestPrometheusGate(t *testing.T) {
	answer := `{"status":"success","data":{"resultType":"vector","result":[]}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(answer)) }))
	defer srv.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	scopeFor := func(url string) *scope {
		return &scope{ro: &nmv1alpha1.NodeMaintenanceRollout{Spec: nmv1alpha1.NodeMaintenanceRolloutSpec{Gates: &nmv1alpha1.RolloutGates{
			Prometheus: &nmv1alpha1.PrometheusGate{URL: url, Query: `ALERTS{alertname="NodeTrouble"}`}}}}}
	}
	if st := prometheusGate(context.Background(), scopeFor(srv.URL)); st.closed {
		t.Errorf("closed on an empty answer: %+v", st)
	}
	answer = `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"severity":"page","alertname":"NodeTrouble"},"value":[1,"1"]}]}}`
	st := prometheusGate(context.Background(), scopeFor(srv.URL))
	want := `the Prometheus gate's query ALERTS{alertname="NodeTrouble"} returns 1 series (first: {alertname="NodeTrouble", severity="page"}); no node starts until it returns none`
	if !st.closed || st.reason != "AlertFiring" || st.message != want {
		t.Errorf("got %+v\nwant closed, AlertFiring, %q", st, want)
	}
	st = prometheusGate(context.Background(), scopeFor(gone.URL))
	if !st.closed || st.reason != "PrometheusUnreachable" || !strings.Contains(st.message, "connection refused") ||
		!strings.Contains(st.message, `ALERTS{alertname="NodeTrouble"}`) {
		t.Errorf("got %+v, want closed, PrometheusUnreachable, naming the query and the refused connection", st)
	}
}
