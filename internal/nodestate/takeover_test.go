package nodestate

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A node that another operator cordoned and tainted, taken over without a
// record, is restored the medik8s way: schedulable, both maintenance taints
// and the label gone, everything else kept.
func TestAdoptedPriorRestoresTheMedik8sWay(t *testing.T) {
	since := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		during *corev1.Node
		want   *corev1.Node
	}{
		{"cordoned with both taints", node(true, nil, unschedulableTaint, drainTaint), node(false, nil)},
		{"with the label and a foreign taint and label",
			node(true, map[string]string{ExcludeFromRemediationLabel: "true", "team": "a"}, foreignTaint, unschedulableTaint, drainTaint),
			node(false, map[string]string{"team": "a"}, foreignTaint)},
		{"uncordoned by someone since", node(false, nil, drainTaint, foreignTaint), node(false, nil, foreignTaint)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prior := AdoptedPrior(tt.during, since)
			if !prior.Adopted || prior.Unschedulable || len(prior.PresentTaints) != 0 || prior.ExcludeLabel != nil || !prior.CordonedAt.Equal(since) {
				t.Fatalf("AdoptedPrior = %+v; want adopted, nothing of the node's current maintenance state recorded", prior)
			}
			got := tt.during.DeepCopy()
			// The adopting operator completes the maintenance state first.
			ApplyMaintenance(got)
			decoded, err := Decode(prior.Encode())
			if err != nil {
				t.Fatal(err)
			}
			Restore(got, decoded)
			if len(got.Spec.Taints) == 0 {
				got.Spec.Taints = nil
			}
			if !reflect.DeepEqual(got.Spec, tt.want.Spec) || !reflect.DeepEqual(normLabels(got.Labels), normLabels(tt.want.Labels)) {
				t.Fatalf("restored to %+v %v, want %+v %v", got.Spec, got.Labels, tt.want.Spec, tt.want.Labels)
			}
		})
	}
}

func TestHasDrainTaint(t *testing.T) {
	noExecute := corev1.Taint{Key: DrainTaintKey, Effect: corev1.TaintEffectNoExecute}
	for _, tt := range []struct {
		node *corev1.Node
		want bool
	}{
		{node(true, nil, unschedulableTaint), false},
		{node(true, nil, unschedulableTaint, drainTaint), true},
		{node(false, nil, drainTaint), true},
		{node(true, nil, noExecute), false},
	} {
		if got := HasDrainTaint(tt.node); got != tt.want {
			t.Errorf("HasDrainTaint(%v) = %v, want %v", tt.node.Spec.Taints, got, tt.want)
		}
	}
}

func normLabels(l map[string]string) map[string]string {
	if len(l) == 0 {
		return nil
	}
	return l
}
