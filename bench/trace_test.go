package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// span is a stretch of wall-clock time: one side's drain, from its clock's
// start to its stop. side names it in a trace ("" is the operator's).
type span struct {
	start, end time.Time
	side       string
}

// writeTrace writes the API requests the cluster's audit log holds within
// each span (BENCH_TRACE), a section per span: one line per request, in the order the API server
// received them, with its offset from s.start, its latency, who made it
// (the client's user agent), what it did and its answer; then the requests
// and their latencies summed by client. It is how to see where the time of
// one maintenance goes between the create and the Succeeded a watch sees.
func writeTrace(t testing.TB, c *testcluster.Cluster, name string, spans ...span) {
	t.Helper()
	dir := resultsDir()
	if dir == "" || len(spans) == 0 {
		return
	}
	events, err := c.AuditEvents(context.Background())
	if err != nil {
		t.Logf("trace not written: %v", err)
		return
	}
	var text string
	rounds := map[string]int{}
	for _, s := range spans {
		side := cmp.Or(s.side, opSide)
		text += fmt.Sprintf("## %s, round %d\n\n%s\n", side, rounds[side], formatTrace(events, s))
		rounds[side]++
	}
	path := filepath.Join(dir, name)
	err = os.MkdirAll(dir, 0o755)
	if err == nil {
		err = os.WriteFile(path, []byte(text), 0o644)
	}
	if err != nil {
		t.Logf("trace not written: %v", err)
		return
	}
	t.Logf("API requests of the operator's rounds: %s", path)
}

// writeRequestTotals writes requestTotals of the requests received within
// s (BENCH_TRACE) to name in the results directory, under title: for a
// scenario too long to list request by request, such as a rollout.
func writeRequestTotals(t testing.TB, c *testcluster.Cluster, name, title string, s span) {
	t.Helper()
	dir := resultsDir()
	if dir == "" {
		return
	}
	events, err := c.AuditEvents(context.Background())
	if err != nil {
		t.Logf("request totals not written: %v", err)
		return
	}
	in := slices.DeleteFunc(events, func(e testcluster.AuditEvent) bool {
		return e.RequestReceivedTimestamp.Before(s.start) || !e.RequestReceivedTimestamp.Before(s.end)
	})
	err = os.MkdirAll(dir, 0o755)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name), []byte("## "+title+"\n"+requestTotals(in)), 0o644)
	}
	if err != nil {
		t.Logf("request totals not written: %v", err)
		return
	}
	t.Logf("API requests of %s: %s", title, filepath.Join(dir, name))
}

// formatTrace is writeTrace's text for the events received within s.
func formatTrace(events []testcluster.AuditEvent, s span) string {
	var in []testcluster.AuditEvent
	for _, e := range events {
		if !e.RequestReceivedTimestamp.Before(s.start) && e.RequestReceivedTimestamp.Before(s.end) {
			in = append(in, e)
		}
	}
	slices.SortStableFunc(in, func(a, b testcluster.AuditEvent) int {
		return a.RequestReceivedTimestamp.Compare(b.RequestReceivedTimestamp)
	})
	ms := func(d time.Duration) string { return fmt.Sprintf("%7.1f", float64(d)/float64(time.Millisecond)) }
	var b strings.Builder
	took := strings.TrimSpace(ms(s.end.Sub(s.start)))
	if s.side == limitSide {
		fmt.Fprintf(&b, "API requests from the limit loop's clock start, before its cordon (+0 ms), to the node seen empty (+%s ms)\n\n", took)
	} else {
		fmt.Fprintf(&b, "API requests from the create (+0 ms) to the Succeeded seen on a watch (+%s ms)\n\n", took)
	}
	fmt.Fprintf(&b, "%7s %7s  %-24s %-7s %-40s %s\n", "at ms", "took ms", "client", "verb", "object", "code")
	for _, e := range in {
		r := e.ObjectRef
		object := r.Resource
		if r.Subresource != "" {
			object += "/" + r.Subresource
		}
		if r.Name != "" {
			object += " " + r.Name
		}
		object += readVersion(e.RequestURI)
		fmt.Fprintf(&b, "%s %s  %-24s %-7s %-40s %d\n", ms(e.RequestReceivedTimestamp.Sub(s.start)), ms(e.StageTimestamp.Sub(e.RequestReceivedTimestamp)), program(e.UserAgent), e.Verb, object, e.ResponseStatus.Code)
	}
	b.WriteString(milestones(in, s))
	b.WriteString(requestTotals(in))
	return b.String()
}

// readVersion is what a read's query asks of the API server's watch cache,
// for the trace: " rv=0" (whatever the cache holds), " rv=1 NotOlderThan",
// " limit=1" (a count), "" (a consistent read of everything, or not a
// read).
func readVersion(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return ""
	}
	q := u.Query()
	var out string
	if rv := q.Get("resourceVersion"); rv != "" && q.Get("watch") == "" {
		out += " rv=" + rv
		if m := q.Get("resourceVersionMatch"); m != "" {
			out += " " + m
		}
	}
	if l := q.Get("limit"); l != "" {
		out += " limit=" + l
	}
	return out
}

// requestTotals sums the requests of events by client, verb and resource
// (with its subresource), the largest total latency first: who asked the
// API server for what, and how long it took to answer.
func requestTotals(events []testcluster.AuditEvent) string {
	type total struct {
		n    int
		took time.Duration
	}
	totals := map[string]*total{}
	for _, e := range events {
		key := program(e.UserAgent) + " " + e.Verb + " " + e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			key += "/" + e.ObjectRef.Subresource
		}
		if totals[key] == nil {
			totals[key] = &total{}
		}
		totals[key].n++
		totals[key].took += e.StageTimestamp.Sub(e.RequestReceivedTimestamp)
	}
	keys := slices.Collect(maps.Keys(totals))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(totals[b].took, totals[a].took), cmp.Compare(a, b)) })
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-60s %5s %9s\n", "by client, verb and resource", "calls", "total ms")
	for _, k := range keys {
		fmt.Fprintf(&b, "%-60s %5d %9.1f\n", k, totals[k].n, float64(totals[k].took)/float64(time.Millisecond))
	}
	return b.String()
}

// milestones sums up a side's drain in the span: when its first eviction
// was received, when the last was answered, when kwok deleted the last of
// the evicted pods, and the clock's stop, each from the clock's start. Two
// sides' milestones side by side say where one's extra time goes: before
// the first eviction (the fixed cost), during the evictions, or between the
// last deletion and the stop (noticing that the node is drained).
func milestones(in []testcluster.AuditEvent, s span) string {
	client := "node-maintenance-operator"
	if s.side == limitSide {
		client = "bench.test"
	}
	var first, lastAnswer, lastDelete time.Time
	evicted := map[string]bool{}
	for _, e := range in {
		if program(e.UserAgent) == client && e.Verb == "create" && e.ObjectRef.Subresource == "eviction" {
			if first.IsZero() {
				first = e.RequestReceivedTimestamp
			}
			if e.StageTimestamp.After(lastAnswer) {
				lastAnswer = e.StageTimestamp
			}
			evicted[e.ObjectRef.Namespace+"/"+e.ObjectRef.Name] = true
		}
	}
	for _, e := range in {
		if e.Verb == "delete" && e.ObjectRef.Resource == "pods" && e.ObjectRef.Subresource == "" && e.ResponseStatus.Code == 200 &&
			evicted[e.ObjectRef.Namespace+"/"+e.ObjectRef.Name] && e.StageTimestamp.After(lastDelete) {
			lastDelete = e.StageTimestamp
		}
	}
	at := func(t time.Time) string {
		if t.IsZero() {
			return "    none"
		}
		return fmt.Sprintf("%8.1f", float64(t.Sub(s.start))/float64(time.Millisecond))
	}
	return fmt.Sprintf("\nmilestones (ms from the clock's start): first eviction received %s, last eviction answered %s, "+
		"last evicted pod deleted %s, clock stopped %s (%d pods evicted)\n",
		at(first), at(lastAnswer), at(lastDelete), at(s.end), len(evicted))
}

// program is the program part of a user agent ("kube-scheduler/v1.37.2
// (linux/amd64) ..." is kube-scheduler).
func program(userAgent string) string {
	name, _, _ := strings.Cut(userAgent, " ")
	name, _, _ = strings.Cut(name, "/")
	return cmp.Or(name, "?")
}

func TestFormatTraceKeepsTheSpanInOrder(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	ev := func(at, took time.Duration, ua, verb, resource, name string) testcluster.AuditEvent {
		e := testcluster.AuditEvent{Verb: verb, UserAgent: ua, RequestReceivedTimestamp: t0.Add(at), StageTimestamp: t0.Add(at + took)}
		e.ObjectRef.Resource, e.ObjectRef.Name = resource, name
		e.ResponseStatus.Code = 200
		return e
	}
	events := []testcluster.AuditEvent{
		ev(30*time.Millisecond, 5*time.Millisecond, "node-maintenance-operator/v0 (linux/amd64)", "patch", "nodes", "n1"),
		ev(-time.Millisecond, time.Millisecond, "kubectl/v1.37.2", "get", "nodes", "before"),
		ev(10*time.Millisecond, 20*time.Millisecond, "bench.test/v0", "create", "nodemaintenances", "bench-n1"),
		ev(100*time.Millisecond, time.Millisecond, "kubectl/v1.37.2", "get", "nodes", "after"),
	}
	evict := ev(40*time.Millisecond, 10*time.Millisecond, "node-maintenance-operator/v0", "create", "pods", "web-1")
	evict.ObjectRef.Subresource, evict.ObjectRef.Namespace = "eviction", "shop"
	gone := ev(70*time.Millisecond, 5*time.Millisecond, "kwok-controller/v0.8.0", "delete", "pods", "web-1")
	gone.ObjectRef.Namespace = "shop"
	events = append(events, evict, gone)
	got := formatTrace(events, span{start: t0, end: t0.Add(100 * time.Millisecond)})
	if !strings.Contains(got, "first eviction received     40.0, last eviction answered     50.0, last evicted pod deleted     75.0, clock stopped    100.0 (1 pods evicted)") {
		t.Errorf("milestones missing or wrong:\n%s", got)
	}
	create, patch := strings.Index(got, "create  nodemaintenances bench-n1"), strings.Index(got, "patch   nodes n1")
	if create < 0 || patch < 0 || patch < create {
		t.Errorf("want the create, then the patch:\n%s", got)
	}
	if strings.Contains(got, "before") || strings.Contains(got, "after") {
		t.Errorf("requests outside the span are in the trace:\n%s", got)
	}
	if !strings.Contains(got, "node-maintenance-operator patch nodes") {
		t.Errorf("no total by client:\n%s", got)
	}
}

// appendResult appends text to the file name of the results directory.
func appendResult(t testing.TB, name, text string) {
	t.Helper()
	dir := resultsDir()
	if dir == "" {
		return
	}
	err := os.MkdirAll(dir, 0o755)
	if err == nil {
		var f *os.File
		if f, err = os.OpenFile(filepath.Join(dir, name), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			_, err = f.WriteString(text)
			err = errors.Join(err, f.Close())
		}
	}
	if err != nil {
		t.Logf("%s not written: %v", name, err)
	}
}

func TestReadVersionNamesHowAListReads(t *testing.T) {
	for uri, want := range map[string]string{
		"/api/v1/pods?limit=1": " limit=1",
		"/api/v1/pods?limit=1&resourceVersion=1&resourceVersionMatch=NotOlderThan": " rv=1 NotOlderThan limit=1",
		"/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&resourceVersion=0":          " rv=0",
		"/api/v1/pods?watch=true&resourceVersion=266":                              "",
		"/api/v1/nodes/n1": "",
	} {
		if got := readVersion(uri); got != want {
			t.Errorf("readVersion(%q) = %q, want %q", uri, got, want)
		}
	}
}
