package controller

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
)

func TestDrainProgress(t *testing.T) {
	tests := []struct{ evictionPods, pending, want int }{
		{0, 0, 100},
		{0, 2, 0}, // pods arrived after the count: not done
		{4, 4, 0},
		{4, 3, 25},
		{3, 1, 66},
		{4, 0, 100},
		{4, 6, 0}, // more pending than counted: clamped
	}
	for _, tt := range tests {
		if got := drainProgress(tt.evictionPods, tt.pending); got != tt.want {
			t.Errorf("drainProgress(%d, %d) = %d, want %d", tt.evictionPods, tt.pending, got, tt.want)
		}
	}
}

func FuzzDrainProgressStaysInRange(f *testing.F) {
	f.Add(5, 3)
	f.Add(0, 0)
	f.Add(-1, 7)
	f.Fuzz(func(t *testing.T, evictionPods, pending int) {
		if pending < 0 {
			pending = -pending
		}
		if got := drainProgress(evictionPods, pending); got < 0 || got > 100 {
			t.Fatalf("drainProgress(%d, %d) = %d, outside 0..100", evictionPods, pending, got)
		}
	})
}

func TestSetPendingIsSortedAndStable(t *testing.T) {
	mk := func(ns, name string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	a := &nmv1beta1.NodeMaintenanceStatus{}
	b := &nmv1beta1.NodeMaintenanceStatus{}
	setPending(a, []corev1.Pod{mk("b", "x"), mk("a", "z"), mk("a", "y")})
	setPending(b, []corev1.Pod{mk("a", "y"), mk("b", "x"), mk("a", "z")})
	if !slices.Equal(a.PendingPods, []string{"y", "z", "x"}) || !slices.Equal(a.PendingPodsRefs, b.PendingPodsRefs) {
		t.Fatalf("pending not sorted by namespace/name: %v / %v vs %v", a.PendingPods, a.PendingPodsRefs, b.PendingPodsRefs)
	}
	setPending(a, nil)
	if a.PendingPods != nil || a.PendingPodsRefs != nil {
		t.Fatalf("empty pending should clear both lists: %+v", a)
	}
}

// lastError stays within maxLastErrorBytes, is cut on a UTF-8 boundary and
// says it was cut; a short message is left alone.
func TestBoundedError(t *testing.T) {
	if got := boundedError("pod a is blocked"); got != "pod a is blocked" {
		t.Errorf("a short message changed: %q", got)
	}
	for _, long := range []string{strings.Repeat("x", 10000), strings.Repeat("維", 3000), strings.Repeat("x", maxLastErrorBytes+1)} {
		got := boundedError(long)
		if len(got) > maxLastErrorBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, "(truncated)") {
			t.Errorf("boundedError of %d bytes: %d bytes, valid UTF-8 %v, ends %q", len(long), len(got), utf8.ValidString(got), got[max(0, len(got)-20):])
		}
	}
	if got := boundedError(strings.Repeat("x", maxLastErrorBytes)); len(got) != maxLastErrorBytes || strings.HasSuffix(got, "(truncated)") {
		t.Errorf("a message of exactly the bound was cut: %d bytes", len(got))
	}
}
