package ledger

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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
