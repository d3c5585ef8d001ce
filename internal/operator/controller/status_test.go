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

func TestOnlyCounts(t *testing.T) {
	base := nmv1beta1.NodeMaintenanceStatus{Phase: nmv1beta1.MaintenanceRunning, EvictionPods: 3, PendingPods: []string{"a", "b"},
		Conditions: []metav1.Condition{{Type: nmv1beta1.ConditionDrained, Status: metav1.ConditionFalse, Reason: nmv1beta1.ReasonDraining, Message: "2 pods still to leave the node"}}}
	for _, tc := range []struct {
		name string
		edit func(*nmv1beta1.NodeMaintenanceStatus)
		want bool
	}{
		{"a pod fewer", func(s *nmv1beta1.NodeMaintenanceStatus) {
			s.PendingPods, s.DrainProgress, s.Conditions[0].Message = []string{"b"}, 66, "1 pods still to leave the node"
		}, true},
		{"phase", func(s *nmv1beta1.NodeMaintenanceStatus) { s.Phase = nmv1beta1.MaintenanceSucceeded }, false},
		{"lastError", func(s *nmv1beta1.NodeMaintenanceStatus) { s.LastError = "refused" }, false},
		{"condition reason", func(s *nmv1beta1.NodeMaintenanceStatus) { s.Conditions[0].Reason = nmv1beta1.ReasonBlockedByPDB }, false},
		{"condition status", func(s *nmv1beta1.NodeMaintenanceStatus) { s.Conditions[0].Status = metav1.ConditionTrue }, false},
		{"new condition", func(s *nmv1beta1.NodeMaintenanceStatus) {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: nmv1beta1.ConditionCordoned, Status: metav1.ConditionTrue})
		}, false},
	} {
		next := base.DeepCopy()
		tc.edit(next)
		if got := onlyCounts(&base, next); got != tc.want {
			t.Errorf("%s: onlyCounts = %t, want %t", tc.name, got, tc.want)
		}
	}
}
