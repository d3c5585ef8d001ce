package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

// Reasons of the Gated condition while the Prometheus gate is closed.
const (
	reasonAlertFiring           = "AlertFiring"
	reasonPrometheusUnreachable = "PrometheusUnreachable"
)

// prometheusTimeout bounds one query: a Prometheus that does not answer in
// time holds the nodes like one that cannot be reached.
const prometheusTimeout = 10 * time.Second

// maxPrometheusAnswer is the most of an answer read (a query that returns
// thousands of series holds the nodes anyway; the count is then a floor).
const maxPrometheusAnswer = 4 << 20

// prometheusClient asks the gates' Prometheus servers. It is Go's default
// transport (so HTTP_PROXY, HTTPS_PROXY and NO_PROXY apply as to any Go
// program; loopback addresses never go through a proxy) with a timeout.
var prometheusClient = &http.Client{Timeout: prometheusTimeout, Transport: http.DefaultTransport.(*http.Transport).Clone()}

// prometheusGate is closed while spec.gates.prometheus's query returns any
// series, and while Prometheus cannot be asked or gives an answer that is
// not a success: the rollout never proceeds blind.
func prometheusGate(ctx context.Context, s *scope) gateState {
	if s.ro.Spec.Gates == nil || s.ro.Spec.Gates.Prometheus == nil {
		return gateState{}
	}
	g := s.ro.Spec.Gates.Prometheus
	series, err := queryPrometheus(ctx, prometheusClient, g)
	switch {
	case err != nil:
		return gateState{closed: true, reason: reasonPrometheusUnreachable,
			message: fmt.Sprintf("the Prometheus gate cannot tell whether %s returns series: %v; no node starts until Prometheus answers", g.Query, err)}
	case len(series) > 0:
		return gateState{closed: true, reason: reasonAlertFiring,
			message: fmt.Sprintf("the Prometheus gate's query %s returns %d series (%s); no node starts until it returns none", g.Query, len(series), seriesSummary(series))}
	}
	return gateState{}
}

// promAnswer is the envelope of Prometheus's HTTP API.
type promAnswer struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// queryPrometheus runs the gate's instant query and returns the label sets
// of the series it returned. An error says why there is no answer to trust:
// Prometheus unreachable, a status other than 2xx, an error status, an
// answer that is not JSON or not a vector.
func queryPrometheus(ctx context.Context, hc *http.Client, g *nmv1alpha1.PrometheusGate) ([]map[string]string, error) {
	base, err := url.Parse(g.URL)
	if err != nil {
		return nil, fmt.Errorf("spec.gates.prometheus.url %q: %w", g.URL, err)
	}
	u := base.JoinPath("api/v1/query")
	u.RawQuery = url.Values{"query": {g.Query}}.Encode()
	ctx, cancel := context.WithTimeout(ctx, prometheusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL, query included, is in the message already
		}
		return nil, fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPrometheusAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s: %w", base.Redacted(), err)
	}
	return parsePrometheusAnswer(base.Redacted(), resp.StatusCode, body)
}

func parsePrometheusAnswer(at string, code int, body []byte) ([]map[string]string, error) {
	var a promAnswer
	jsonErr := json.Unmarshal(body, &a)
	switch {
	case a.Status == "error" || (jsonErr == nil && a.Error != ""):
		return nil, fmt.Errorf("%s answered %d with an error: %s: %s", at, code, a.ErrorType, a.Error)
	case code < 200 || code > 299:
		return nil, fmt.Errorf("%s answered %d %s: %s", at, code, http.StatusText(code), snippet(body))
	case jsonErr != nil:
		return nil, fmt.Errorf("the answer of %s is not the JSON of Prometheus's API (%v): %s", at, jsonErr, snippet(body))
	case a.Status != "success":
		return nil, fmt.Errorf("the answer of %s has status %q, not success", at, a.Status)
	case a.Data.ResultType != "vector" && a.Data.ResultType != "matrix":
		return nil, fmt.Errorf("the answer of %s is a %q, not a vector of series", at, a.Data.ResultType)
	}
	var result []struct {
		Metric map[string]string `json:"metric"`
	}
	if err := json.Unmarshal(a.Data.Result, &result); err != nil {
		return nil, fmt.Errorf("the series in the answer of %s cannot be read: %v", at, err)
	}
	series := make([]map[string]string, 0, len(result))
	for _, r := range result {
		series = append(series, r.Metric)
	}
	return series, nil
}

// seriesSummary names the first series by its labels, alertname first,
// sorted so that the message does not change while the answer does not.
func seriesSummary(series []map[string]string) string {
	sets := make([]string, 0, len(series))
	for _, m := range series {
		sets = append(sets, labelSet(m))
	}
	sort.Strings(sets)
	return "first: " + sets[0]
}

func labelSet(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if (keys[i] == "alertname") != (keys[j] == "alertname") {
			return keys[i] == "alertname"
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// snippet is the start of an answer that is not what was expected, on one
// line.
func snippet(body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	if s == "" {
		return "(empty)"
	}
	return s
}
