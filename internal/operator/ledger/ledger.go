// Package ledger holds the admission ledger: how the webhook's replicas
// agree on the NodeMaintenance creates they admitted.
//
// A create is admitted before the API server stores it, so a check of the
// stored NodeMaintenances alone lets two creates that race through two
// replicas both pass. Every admission therefore ends with a write of one
// shared object, a Lease, guarded by its resourceVersion: it records the
// create (node, name, time) before the webhook answers. Two admissions that
// decided on the same version of the ledger cannot both write it; the loser
// reads again, sees the winner's entry and decides anew. An entry is
// forgotten when its NodeMaintenance is finalized or gone, and otherwise
// after TTL (stored long since, or the create never landed): the webhook
// lists NodeMaintenances from the API server's watch cache, which may not
// show a create of moments ago, and the entry covers it meanwhile. The
// Lease needs no permission the operator does not already have for the node
// leases.
package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
)

const (
	// LedgerName is the Lease, in lease.Namespace, that records admitted
	// creates. Its name does not start like a node lease's ("node-").
	LedgerName = "nodemaintenance-admissions"
	// TTL is how long an entry holds its node while the API server persists
	// the NodeMaintenance it admitted.
	TTL = 10 * time.Second
	// Attempts bounds the rereads of a ledger that keeps changing under us
	// (many creates at once through several replicas).
	Attempts = 20
	// entriesAnnotation holds the entries, as JSON: node name to entry.
	entriesAnnotation = "nodemaintenance.medik8s.io/admitted"
)

// Entry is an admitted create.
type Entry struct {
	Name string    `json:"name"`
	At   time.Time `json:"at"`
}

// Snapshot is one read of the ledger; Write stores it only if nobody wrote
// the ledger since.
type Snapshot struct {
	// Entries maps node name to the create admitted for it.
	Entries map[string]Entry
	// lease is nil when the ledger does not exist yet.
	lease *coordinationv1.Lease
	// remembered: read from the Ledger's memory, not from the API server.
	remembered bool
}

// Ledger reads the ledger and writes it with optimistic concurrency. It
// remembers the version it last read or wrote, and Read answers from it
// without a request: the webhook and the controller of one process share
// one Ledger, so in a single replica the remembered version is the stored
// one, and each admission and each release costs one write instead of a
// read and a write (the read was a round trip on the path of every create).
// What keeps it right when the memory is stale (another replica wrote, or
// someone deleted the ledger): Write then fails with an error for which
// Retryable is true and forgets the memory, and the caller's retry reads
// live. A decision that writes nothing (a refusal) must not rest on the
// memory: ReadLive is for it.
type Ledger struct {
	// Reader reads live from the API server, never from a cache.
	Reader client.Reader
	Writer client.Writer

	mu sync.Mutex
	// last is the ledger as this process last read or wrote it; nil when
	// unknown (never read, or a write failed).
	last *coordinationv1.Lease
}

// Read returns the ledger as this process last read or wrote it, or, when
// it knows none, as it is now; an absent ledger is empty.
func (l *Ledger) Read(ctx context.Context) (*Snapshot, error) {
	l.mu.Lock()
	last := l.last
	l.mu.Unlock()
	if last != nil {
		s := snapshotOf(last.DeepCopy())
		s.remembered = true
		return s, nil
	}
	return l.ReadLive(ctx)
}

// ReadLive returns the ledger as it is now, read from the API server; an
// absent ledger is empty.
func (l *Ledger) ReadLive(ctx context.Context) (*Snapshot, error) {
	obj := &coordinationv1.Lease{}
	err := l.Reader.Get(ctx, client.ObjectKey{Namespace: lease.Namespace, Name: LedgerName}, obj)
	switch {
	case apierrors.IsNotFound(err):
		l.remember(nil)
		return &Snapshot{Entries: map[string]Entry{}}, nil
	case err != nil:
		return nil, fmt.Errorf("cannot read the admission ledger %s/%s: %w", lease.Namespace, LedgerName, err)
	}
	l.remember(obj)
	return snapshotOf(obj.DeepCopy()), nil
}

// remember keeps obj (nil: nothing) as the ledger's last known version.
func (l *Ledger) remember(obj *coordinationv1.Lease) {
	if obj != nil {
		obj = obj.DeepCopy()
	}
	l.mu.Lock()
	l.last = obj
	l.mu.Unlock()
}

// snapshotOf reads the entries of the ledger obj.
func snapshotOf(obj *coordinationv1.Lease) *Snapshot {
	entries := map[string]Entry{}
	if raw := obj.Annotations[entriesAnnotation]; raw != "" {
		// A damaged ledger starts afresh: what it held is at most TTL old,
		// and the stored NodeMaintenances still count.
		if err := json.Unmarshal([]byte(raw), &entries); err != nil {
			entries = map[string]Entry{}
		}
	}
	return &Snapshot{Entries: entries, lease: obj}
}

// Write stores s if nobody wrote the ledger since s was read; otherwise it
// returns an error for which Retryable is true, and the next Read reads
// live.
func (l *Ledger) Write(ctx context.Context, s *Snapshot) error {
	obj, err := l.write(ctx, s)
	if err != nil {
		l.remember(nil)
		if apierrors.IsNotFound(err) && s.lease != nil {
			// The ledger was deleted since s was read: a lost race too.
			return apierrors.NewConflict(coordinationv1.Resource("leases"), LedgerName, err)
		}
		return err
	}
	l.remember(obj)
	return nil
}

// write is Write's request; it returns the ledger as stored.
func (l *Ledger) write(ctx context.Context, s *Snapshot) (*coordinationv1.Lease, error) {
	raw, err := json.Marshal(s.Entries)
	if err != nil {
		return nil, err
	}
	if s.lease == nil {
		obj := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Namespace: lease.Namespace, Name: LedgerName, Annotations: map[string]string{entriesAnnotation: string(raw)},
		}}
		err := l.Writer.Create(ctx, obj)
		if apierrors.IsNotFound(err) {
			// The namespace of the node leases does not exist yet.
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: lease.Namespace}}
			if nerr := l.Writer.Create(ctx, ns); nerr != nil && !apierrors.IsAlreadyExists(nerr) {
				return nil, fmt.Errorf("cannot create namespace %s for the admission ledger: %w", lease.Namespace, nerr)
			}
			err = l.Writer.Create(ctx, obj)
		}
		return obj, err
	}
	obj := s.lease.DeepCopy()
	if obj.Annotations == nil {
		obj.Annotations = map[string]string{}
	}
	obj.Annotations[entriesAnnotation] = string(raw)
	return obj, l.Writer.Update(ctx, obj)
}

// Release forgets the entry of node if it is name's: the NodeMaintenance is
// gone, and its node is free for the next create at once. An empty node
// forgets name's entry whatever its node (a NodeMaintenance known only by
// name, deleted before the operator saw its spec).
func (l *Ledger) Release(ctx context.Context, node, name string) error {
	read := l.Read
	for attempt := 1; ; attempt++ {
		s, err := read(ctx)
		if err != nil {
			return err
		}
		at, ok := s.entryOf(node, name)
		switch {
		case !ok && s.remembered:
			// The memory may lack an entry another replica wrote since.
			read = l.ReadLive
			continue
		case !ok:
			return nil
		}
		delete(s.Entries, at)
		err = l.Write(ctx, s)
		if !Retryable(err) || attempt == Attempts {
			return err
		}
		read = l.Read
	}
}

// entryOf returns the node whose entry is name's: node's, or, when node is
// empty, any.
func (s *Snapshot) entryOf(node, name string) (string, bool) {
	for n, e := range s.Entries {
		if e.Name == name && (node == "" || n == node) {
			return n, true
		}
	}
	return "", false
}

// Retryable reports a lost race for the ledger: read it again and decide
// anew.
func Retryable(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
}
