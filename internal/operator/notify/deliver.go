package notify

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	ctrl "sigs.k8s.io/controller-runtime"
)

// deliver sends one event, retrying a failed attempt after a backoff that
// doubles, until it is delivered, refused for good, out of attempts or the
// Sender stopped.
func (s *Sender) deliver(ctx context.Context, it item) {
	ev, err := it.event.cloudEvent()
	if err != nil {
		s.drop(it.event, err.Error())
		return
	}
	wait := s.o.Backoff
	for attempt := 1; ; attempt++ {
		err = s.post(ctx, it.dest, ev)
		if err == nil {
			sent.WithLabelValues(it.event.Type).Inc()
			return
		}
		if attempt == s.o.Attempts || !retriable(err) {
			s.drop(it.event, fmt.Sprintf("POST %s failed %d times, last: %v", it.dest.URL, attempt, err))
			return
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			s.drop(it.event, fmt.Sprintf("the operator stopped while POST %s was retried; last: %v", it.dest.URL, err))
			return
		}
		wait = min(2*wait, s.o.MaxBackoff)
	}
}

// post makes one attempt, within Options.Timeout.
func (s *Sender) post(ctx context.Context, d Destination, ev cloudevents.Event) error {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	header := http.Header{}
	if d.Token != nil {
		token, err := d.Token(ctx)
		if err != nil {
			return fmt.Errorf("read the bearer token: %w", err)
		}
		header.Set("Authorization", "Bearer "+token)
	}
	ctx = cehttp.WithCustomHeader(ctx, header)
	ctx = cloudevents.ContextWithTarget(ctx, d.URL)
	ctx = cloudevents.WithEncodingStructured(ctx)
	if res := s.client.Send(ctx, ev); !cloudevents.IsACK(res) {
		return res
	}
	return nil
}

// retriable reports whether an attempt that failed with err may succeed
// later: anything but an answer that refuses the event (a 4xx other than
// 408 Request Timeout and 429 Too Many Requests).
func retriable(err error) bool {
	var res *cehttp.Result
	if !errors.As(err, &res) {
		return true
	}
	code := res.StatusCode
	return code < 400 || code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests
}

// drop counts and logs an event that is not delivered.
func (s *Sender) drop(e Event, why string) {
	failed.WithLabelValues(e.Type).Inc()
	ctrl.Log.WithName("notify").Info("notification dropped", "type", e.Type, "source", e.Source, "id", e.ID, "why", why)
}
