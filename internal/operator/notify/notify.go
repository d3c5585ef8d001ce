// Package notify sends the operator's notifications: CloudEvents 1.0 in
// structured JSON mode, by HTTP POST, with the CNCF CloudEvents SDK for Go.
//
// Delivery never holds the caller: Send queues the event and returns. Each
// destination and object (a rollout, a NodeMaintenance) has a bounded queue
// of its own, delivered by one goroutine in order, so the events of one
// object arrive in the order they happened while a slow receiver holds only
// its own queues. An attempt that fails (no connection, a timeout, a 5xx,
// 408 or 429) is retried with an exponential backoff, a bounded number of
// times; an event that cannot be delivered is dropped, logged and counted
// (nodemaintenance_notifications_failed_total), as is one that finds its
// queue full. Delivered events are counted too
// (nodemaintenance_notifications_sent_total).
//
// The events are sent from the reconcilers, which run on the leader only,
// so only the leader sends. The Sender is a manager Runnable of the leader:
// when the operator stops, it keeps delivering what is queued for at most
// Options.DrainTimeout, then drops the rest.
package notify

import (
	"context"
	"net/http"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Defaults of Options.
const (
	DefaultQueueSize    = 100
	DefaultAttempts     = 5
	DefaultTimeout      = 10 * time.Second
	DefaultBackoff      = time.Second
	DefaultMaxBackoff   = 30 * time.Second
	DefaultDrainTimeout = 10 * time.Second
)

// Options tune the delivery. Zero fields take the Default* above.
type Options struct {
	// QueueSize bounds the events waiting for one destination and object;
	// an event beyond it is dropped and counted.
	QueueSize int
	// Attempts bounds the tries of one event.
	Attempts int
	// Timeout bounds one attempt, the reading of its bearer token included.
	Timeout time.Duration
	// Backoff is the wait after the first failed attempt; it doubles after
	// each failure, up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// DrainTimeout bounds the delivery of what is queued once the operator
	// stops.
	DrainTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.Attempts <= 0 {
		o.Attempts = DefaultAttempts
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.MaxBackoff < o.Backoff {
		o.MaxBackoff = max(DefaultMaxBackoff, o.Backoff)
	}
	if o.DrainTimeout <= 0 {
		o.DrainTimeout = DefaultDrainTimeout
	}
	return o
}

// Destination is where events go.
type Destination struct {
	// URL receives the events by HTTP POST.
	URL string
	// Token, when set, gives the bearer token sent with each attempt
	// (Authorization: Bearer <token>). It is called at delivery, never by
	// Send; an error fails the attempt.
	Token func(ctx context.Context) (string, error)
}

// item is one queued event.
type item struct {
	dest  Destination
	event Event
}

// queue holds the events of one destination and object, delivered in order
// by one goroutine while it is not empty.
type queue struct {
	items []item
}

// Sender delivers events. A nil *Sender sends nothing.
type Sender struct {
	o      Options
	client cloudevents.Client

	// ctx ends the deliveries: cancelled once the drain bound has passed.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	queues  map[string]*queue
	stopped bool
	workers sync.WaitGroup
}

// New returns a Sender; its deliveries run until the Runnable it is stops.
func New(o Options) (*Sender, error) {
	o = o.withDefaults()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	client, err := cloudevents.NewClientHTTP(cehttp.WithClient(http.Client{Transport: transport, Timeout: o.Timeout}))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Sender{o: o, client: client, ctx: ctx, cancel: cancel, queues: map[string]*queue{}}, nil
}

// Send queues e for d behind the events queued before it with the same key
// (the object the event is about) and returns at once. An event that finds
// its queue full, or the Sender stopped, is dropped and counted.
func (s *Sender) Send(d Destination, key string, e Event) {
	if s == nil {
		return
	}
	qk := d.URL + "\x00" + key
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		s.drop(e, "the operator is stopping")
		return
	}
	q := s.queues[qk]
	if q == nil {
		q = &queue{}
		s.queues[qk] = q
		s.workers.Add(1)
		go s.work(qk, q)
	}
	if len(q.items) >= s.o.QueueSize {
		s.drop(e, "its queue is full: the receiver does not keep up")
		return
	}
	q.items = append(q.items, item{dest: d, event: e})
}

// work delivers a queue's events in order, and ends when it is empty (the
// next Send starts another).
func (s *Sender) work(qk string, q *queue) {
	defer s.workers.Done()
	for {
		s.mu.Lock()
		if len(q.items) == 0 {
			delete(s.queues, qk)
			s.mu.Unlock()
			return
		}
		next := q.items[0]
		q.items = q.items[1:]
		s.mu.Unlock()
		s.deliver(s.ctx, next)
	}
}

// Start runs until ctx ends, then delivers what is queued for at most
// DrainTimeout and drops the rest: the manager's Runnable, on the leader.
func (s *Sender) Start(ctx context.Context) error {
	<-ctx.Done()
	done := make(chan struct{})
	go func() { s.workers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.o.DrainTimeout):
		ctrl.Log.WithName("notify").Info("notifications still queued when the operator stopped are dropped", "after", s.o.DrainTimeout)
	}
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.cancel()
	s.workers.Wait()
	return nil
}
