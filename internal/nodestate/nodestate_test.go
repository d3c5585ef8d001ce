package nodestate

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var (
	unschedulableTaint = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	drainTaint         = corev1.Taint{Key: DrainTaintKey, Effect: corev1.TaintEffectNoSchedule}
	foreignTaint       = corev1.Taint{Key: "example.com/gpu", Value: "a100", Effect: corev1.TaintEffectNoSchedule}
)

func node(unschedulable bool, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}, Spec: corev1.NodeSpec{Unschedulable: unschedulable, Taints: taints}}
}

// Maintenance and restore round-trip to exactly the original node, whatever
// it looked like before.
func TestApplyThenRestoreRoundTrips(t *testing.T) {
	tests := []struct {
		name   string
		before *corev1.Node
		// want, when set, differs from before on purpose.
		want *corev1.Node
	}{
		{"plain node", node(false, nil), nil},
		{"foreign taint and label", node(false, map[string]string{"team": "a"}, foreignTaint), nil},
		{"already cordoned", node(true, nil, unschedulableTaint), nil},
		// The unschedulable taint belongs to the cordon, which stays; the node
		// lifecycle controller would add it anyway.
		{"cordoned without its taint yet", node(true, nil), node(true, nil, unschedulableTaint)},
		{"already has the drain taint", node(false, nil, drainTaint, foreignTaint), nil},
		{"label set to false by someone", node(false, map[string]string{ExcludeFromRemediationLabel: "false"}), nil},
		{"label already true", node(false, map[string]string{ExcludeFromRemediationLabel: "true"}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := tt.before.DeepCopy()
			prior, err := Decode(Record(n, time.Now()).Encode())
			if err != nil {
				t.Fatal(err)
			}
			ApplyMaintenance(n)
			if !InMaintenance(n) {
				t.Fatalf("not in maintenance after ApplyMaintenance: %+v", n.Spec)
			}
			if !hasTaint(n.Spec.Taints, unschedulableTaint) || !hasTaint(n.Spec.Taints, drainTaint) || !n.Spec.Unschedulable {
				t.Fatalf("maintenance state incomplete: %+v", n.Spec)
			}
			Restore(n, prior)
			want := tt.before
			if tt.want != nil {
				want = tt.want
			}
			if len(want.Labels) == 0 && len(n.Labels) == 0 {
				n.Labels = want.Labels
			}
			if len(want.Spec.Taints) == 0 && len(n.Spec.Taints) == 0 {
				n.Spec.Taints = want.Spec.Taints
			}
			if !reflect.DeepEqual(n, want) {
				t.Fatalf("restore did not give back the original node:\n got  %+v %v\n want %+v %v", n.Spec, n.Labels, want.Spec, want.Labels)
			}
		})
	}
}

// Changes made by others during the maintenance survive the restore.
func TestRestoreKeepsConcurrentChanges(t *testing.T) {
	n := node(false, nil)
	prior := Record(n, time.Now())
	ApplyMaintenance(n)
	n.Spec.Taints = append(n.Spec.Taints, foreignTaint)
	n.Labels["added-later"] = "yes"
	if !Restore(n, prior) {
		t.Fatal("restore reported no change")
	}
	if !hasTaint(n.Spec.Taints, foreignTaint) || n.Labels["added-later"] != "yes" {
		t.Fatalf("concurrent changes lost: %+v %v", n.Spec.Taints, n.Labels)
	}
	if Restore(n, prior) {
		t.Fatal("a second restore changed the node again")
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	if _, err := Decode("{not json"); err == nil {
		t.Fatal("garbage decoded")
	}
}

func TestRecordCapturesLabelValue(t *testing.T) {
	p := Record(node(true, map[string]string{ExcludeFromRemediationLabel: "false"}, drainTaint), time.Now())
	if !p.Unschedulable || !reflect.DeepEqual(p.ExcludeLabel, ptr.To("false")) || !reflect.DeepEqual(p.PresentTaints, []corev1.Taint{drainTaint}) {
		t.Fatalf("record: %+v", p)
	}
}
