package ledger

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
)

// Two writers that read the same version: the second write loses and must
// read again; Release forgets only the entry of the named NodeMaintenance.
func TestLedgerOptimisticWritesAndRelease(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	l := &Ledger{Reader: c, Writer: c}
	ctx := context.Background()
	at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

	first, err := l.Read(ctx)
	if err != nil || len(first.Entries) != 0 {
		t.Fatalf("read of an absent ledger = %v, %v; want it empty", first, err)
	}
	second, _ := l.Read(ctx)
	first.Entries["node01"] = Entry{Name: "a", At: at}
	second.Entries["node01"] = Entry{Name: "b", At: at}
	if err := l.Write(ctx, first); err != nil {
		t.Fatalf("first write: %v", err)
	}
	if err := l.Write(ctx, second); !Retryable(err) {
		t.Fatalf("a write of a stale read = %v, want a retryable error", err)
	}
	// Both now decide on the current version.
	third, _ := l.Read(ctx)
	third.Entries["node02"] = Entry{Name: "c", At: at}
	if err := l.Write(ctx, third); err != nil {
		t.Fatalf("write after a reread: %v", err)
	}
	stale, _ := l.Read(ctx)
	if err := l.Release(ctx, "node01", "b"); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, "node01", "a"); err != nil {
		t.Fatal(err)
	}
	got, _ := l.Read(ctx)
	if _, ok := got.Entries["node01"]; ok || got.Entries["node02"].Name != "c" || !got.Entries["node02"].At.Equal(at) {
		t.Fatalf("entries after the release = %v, want node02 only", got.Entries)
	}
	if err := l.Write(ctx, stale); !Retryable(err) {
		t.Fatalf("a write from before the release = %v, want a retryable error", err)
	}
	// Known only by name: the entry goes whatever its node; another name
	// leaves it.
	if err := l.Release(ctx, "", "x"); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.Read(ctx); got.Entries["node02"].Name != "c" {
		t.Fatalf("a release by another name took node02's entry: %v", got.Entries)
	}
	if err := l.Release(ctx, "", "c"); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.Read(ctx); len(got.Entries) != 0 {
		t.Fatalf("entries after the release by name = %v, want none", got.Entries)
	}
}

// What one process wrote, it reads back without a request. Another
// replica's write makes that memory stale: the next write loses, and the
// read after it is live, with the other replica's entry. A ledger deleted
// under the memory is a lost race too.
func TestLedgerRemembersItsOwnWrites(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	gets := 0
	c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets++
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	ours, other := &Ledger{Reader: c, Writer: c}, &Ledger{Reader: c, Writer: c}
	ctx := context.Background()
	at := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
	write := func(l *Ledger, node, name string) error {
		s, err := l.Read(ctx)
		if err != nil {
			return err
		}
		s.Entries[node] = Entry{Name: name, At: at}
		return l.Write(ctx, s)
	}

	if err := write(ours, "node01", "a"); err != nil {
		t.Fatal(err)
	}
	gets = 0
	if err := write(ours, "node02", "b"); err != nil {
		t.Fatal(err)
	}
	if gets != 0 {
		t.Errorf("a write after our own made %d reads, want none", gets)
	}
	if err := write(other, "node03", "c"); err != nil {
		t.Fatal(err)
	}
	if err := write(ours, "node04", "d"); !Retryable(err) {
		t.Fatalf("a write on a memory another replica made stale = %v, want a retryable error", err)
	}
	gets = 0
	s, err := ours.Read(ctx)
	if err != nil || gets != 1 || s.Entries["node03"].Name != "c" || s.Entries["node01"].Name != "a" {
		t.Fatalf("the read after a lost write: %v, %v after %d reads; want node01 a and node03 c, read live", s, err, gets)
	}

	// The other replica admitted node05, which our memory lacks: a release
	// of it must not stop at the memory.
	if err := write(ours, "node06", "f"); err != nil {
		t.Fatal(err)
	}
	if err := write(other, "node05", "e"); !Retryable(err) {
		t.Fatalf("the other replica's write on its stale memory = %v, want a retryable error", err)
	}
	if err := write(other, "node05", "e"); err != nil {
		t.Fatal(err)
	}
	if err := ours.Release(ctx, "node05", "e"); err != nil {
		t.Fatal(err)
	}
	if s, _ := other.ReadLive(ctx); s.Entries["node05"].Name != "" || s.Entries["node06"].Name != "f" {
		t.Fatalf("after releasing node05 through a stale memory: %v, want node05 gone and node06 kept", s.Entries)
	}

	stale, _ := ours.Read(ctx)
	if err := c.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: lease.Namespace, Name: LedgerName}}); err != nil {
		t.Fatal(err)
	}
	if err := ours.Write(ctx, stale); !Retryable(err) {
		t.Fatalf("a write on a deleted ledger = %v, want a retryable error", err)
	}
	if s, err := ours.Read(ctx); err != nil || len(s.Entries) != 0 {
		t.Fatalf("the read after the ledger was deleted: %v, %v; want it empty", s, err)
	}
}
