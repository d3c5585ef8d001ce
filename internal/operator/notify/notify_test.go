package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// receiver records the requests it gets, and answers each with what
// answer says for the attempt's number (1-based).
type receiver struct {
	mu       sync.Mutex
	requests []request
	got      chan struct{}
	answer   func(n int) int
}

type request struct {
	contentType, authorization string
	body                       map[string]any
}

func newReceiver(t *testing.T, answer func(n int) int) (*receiver, *httptest.Server) {
	r := &receiver{answer: answer, got: make(chan struct{}, 1000)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		raw, _ := io.ReadAll(req.Body)
		body := map[string]any{}
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("the body is not JSON: %v: %s", err, raw)
		}
		r.mu.Lock()
		r.requests = append(r.requests, request{req.Header.Get("Content-Type"), req.Header.Get("Authorization"), body})
		n := len(r.requests)
		r.mu.Unlock()
		w.WriteHeader(r.answer(n))
		r.got <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) wait(t *testing.T, n int) []request {
	t.Helper()
	for range n {
		select {
		case <-r.got:
		case <-time.After(time.Minute):
			t.Fatalf("the receiver got %d requests, want %d", len(r.snapshot()), n)
		}
	}
	return r.snapshot()
}

func (r *receiver) snapshot() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.requests...)
}

func always(code int) func(int) int { return func(int) int { return code } }

func newSender(t *testing.T, o Options) *Sender {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runs makes the event types of each run of a test its own, so that the
// counters (global, as the registry's) start at 0 under -count.
var runs sync.Map

func fresh(typ string) string {
	n, _ := runs.LoadOrStore(typ, new(int))
	*n.(*int)++
	return fmt.Sprintf("%s.%d", typ, *n.(*int))
}

func testEvent(typ string, i int) Event {
	return Event{Type: typ, Source: RolloutSource("r"), Subject: "node01", ID: fmt.Sprintf("id-%d", i),
		Time: time.Unix(1700000000, 0).UTC(), Data: RolloutData{Rollout: "r", Event: "NodeDone", Node: "node01", Total: int32(i)}}
}

// Events of one object arrive in the order they were sent, as structured
// CloudEvents JSON with the bearer token, and are counted as sent.
func TestDeliversStructuredEventsInOrder(t *testing.T) {
	typ := fresh("test.order")
	r, srv := newReceiver(t, always(http.StatusAccepted))
	s := newSender(t, Options{})
	dest := Destination{URL: srv.URL, Token: func(context.Context) (string, error) { return "s3cret", nil }}
	const n = 20
	for i := range n {
		s.Send(dest, "rollout/r", testEvent(typ, i))
	}
	got := r.wait(t, n)
	for i, req := range got {
		if req.body["id"] != fmt.Sprintf("id-%d", i) {
			t.Fatalf("request %d carries event %v: out of order", i, req.body["id"])
		}
	}
	first := got[0]
	if first.contentType != "application/cloudevents+json" || first.authorization != "Bearer s3cret" {
		t.Errorf("content type %q, authorization %q; want structured mode and the bearer token", first.contentType, first.authorization)
	}
	want := map[string]any{"specversion": "1.0", "type": typ, "source": "/apis/nodemaintenance.io/v1alpha1/nodemaintenancerollouts/r",
		"subject": "node01", "datacontenttype": "application/json", "time": "2023-11-14T22:13:20Z"}
	for k, v := range want {
		if first.body[k] != v {
			t.Errorf("attribute %s = %v, want %v", k, first.body[k], v)
		}
	}
	if data, _ := first.body["data"].(map[string]any); data["rollout"] != "r" || data["node"] != "node01" || data["event"] != "NodeDone" {
		t.Errorf("data = %v", first.body["data"])
	}
	waitCounter(t, "sent", sent.WithLabelValues(typ), n)
}

// A receiver that fails a few times gets the event once it answers, with
// the same id on every attempt.
func TestRetriesAFailedDeliveryWithTheSameID(t *testing.T) {
	typ := fresh("test.retry")
	r, srv := newReceiver(t, func(n int) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	s := newSender(t, Options{Backoff: time.Millisecond})
	s.Send(Destination{URL: srv.URL}, "k", testEvent(typ, 7))
	got := r.wait(t, 3)
	for i, req := range got {
		if req.body["id"] != "id-7" || req.authorization != "" {
			t.Errorf("attempt %d: id %v, authorization %q", i+1, req.body["id"], req.authorization)
		}
	}
	waitCounter(t, "sent", sent.WithLabelValues(typ), 1)
	if v := testutil.ToFloat64(failed.WithLabelValues(typ)); v != 0 {
		t.Errorf("failed counter %v after a delivery that succeeded on retry", v)
	}
}

// An event the receiver never takes is dropped after Attempts and counted;
// one it refuses (400) is dropped at once; the next event still goes.
func TestDropsAnUndeliverableEventAndCountsIt(t *testing.T) {
	down, refused := fresh("test.down"), fresh("test.refused")
	r, srv := newReceiver(t, func(n int) int {
		switch {
		case n <= 3:
			return http.StatusServiceUnavailable
		case n == 4:
			return http.StatusBadRequest
		}
		return http.StatusOK
	})
	s := newSender(t, Options{Attempts: 3, Backoff: time.Millisecond})
	dest := Destination{URL: srv.URL}
	s.Send(dest, "k", testEvent(down, 1))
	s.Send(dest, "k", testEvent(refused, 2))
	s.Send(dest, "k", testEvent(down, 3))
	got := r.wait(t, 5)
	ids := []any{}
	for _, req := range got {
		ids = append(ids, req.body["id"])
	}
	if fmt.Sprint(ids) != "[id-1 id-1 id-1 id-2 id-3]" {
		t.Errorf("attempts carried %v, want id-1 three times, id-2 once, then id-3", ids)
	}
	waitCounter(t, "failed", failed.WithLabelValues(down), 1)
	waitCounter(t, "failed", failed.WithLabelValues(refused), 1)
	waitCounter(t, "sent", sent.WithLabelValues(down), 1)
}

// A receiver that hangs holds neither Send nor the other destinations; its
// queue overflows into drops, and Start gives up on it within DrainTimeout.
func TestSendNeverBlocksOnAHangingReceiver(t *testing.T) {
	typ := fresh("test.hang")
	release := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, req *http.Request) {
		select {
		case <-release:
		case <-req.Context().Done():
		}
	}))
	defer hanging.Close()
	defer close(release)
	r, srv := newReceiver(t, always(http.StatusOK))
	s := newSender(t, Options{QueueSize: 5, Timeout: time.Hour, DrainTimeout: 100 * time.Millisecond})
	const n = 50
	for i := range n {
		s.Send(Destination{URL: hanging.URL}, "k", testEvent(typ, i))
	}
	s.Send(Destination{URL: srv.URL}, "k", testEvent(typ+".other", 0))
	r.wait(t, 1)
	// One in flight, QueueSize queued: the others were dropped at once.
	if v := testutil.ToFloat64(failed.WithLabelValues(typ)); v < n-1-5 {
		t.Errorf("failed counter %v with a full queue, want at least %d", v, n-1-5)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitCounter(t, "failed", failed.WithLabelValues(typ), n)
	s.Send(Destination{URL: srv.URL}, "k", testEvent(typ, 99))
	waitCounter(t, "failed", failed.WithLabelValues(typ), n+1)
}

// Stopping delivers what is queued first.
func TestStartDeliversTheQueueBeforeItReturns(t *testing.T) {
	typ := fresh("test.drain")
	r, srv := newReceiver(t, always(http.StatusOK))
	s := newSender(t, Options{})
	for i := range 10 {
		s.Send(Destination{URL: srv.URL}, fmt.Sprint(i%3), testEvent(typ, i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(r.snapshot()); got != 10 {
		t.Errorf("the receiver got %d events when Start returned, want 10", got)
	}
}

// waitCounter waits until the counter reaches want: deliveries end after
// the receiver answered.
func waitCounter(t *testing.T, name string, c prometheus.Collector, want float64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for testutil.ToFloat64(c) < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s counter is %v, want %v", name, testutil.ToFloat64(c), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := testutil.ToFloat64(c); got != want {
		t.Errorf("%s counter is %v, want %v", name, got, want)
	}
}
