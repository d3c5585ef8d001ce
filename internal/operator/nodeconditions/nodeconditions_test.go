package nodeconditions

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/nodestate"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/nodewrites"
)

// lagging is a client whose reads return the node as it was when the test
// began, as an informer cache that has not seen the writes yet; its writes
// go to the store.
type lagging struct {
	client.Client
	then *corev1.Node
}

func (l lagging) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	l.then.DeepCopyInto(obj.(*corev1.Node))
	return nil
}

// counting counts the live reads.
type counting struct {
	client.Reader
	gets int
}

func (c *counting) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets++
	return c.Reader.Get(ctx, key, obj, opts...)
}

// Two patches in a row through a cache that has seen neither: with the
// writes remembered (nodewrites), the second is made on the node as the
// first left it, at once; without, it loses its resourceVersion guard to the
// first and needs a live read. Either way the node ends with both conditions.
func TestPatchAfterPatchReadsTheNodeAsWritten(t *testing.T) {
	for _, tc := range []struct {
		name      string
		recent    *nodewrites.Recent
		liveReads int
	}{
		{"remembered", &nodewrites.Recent{}, 0},
		{"not remembered", nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			if err := corev1.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
			store := fake.NewClientBuilder().WithScheme(scheme).WithObjects(n).WithStatusSubresource(n).Build()
			then := &corev1.Node{}
			ctx := context.Background()
			if err := store.Get(ctx, client.ObjectKeyFromObject(n), then); err != nil {
				t.Fatal(err)
			}
			c, live := lagging{Client: store, then: then}, &counting{Reader: store}
			set := func(t corev1.NodeConditionType) func(*corev1.Node) []nodestate.ConditionEdit {
				want := corev1.NodeCondition{Type: t, Status: corev1.ConditionTrue, Reason: nodestate.ReasonAdminRequested, Message: nodestate.Message("test")}
				return func(n *corev1.Node) []nodestate.ConditionEdit {
					return nodestate.SetConditions(n.Status.Conditions, []corev1.NodeCondition{want}, nodestate.Written, time.Now())
				}
			}
			for _, ct := range []corev1.NodeConditionType{corev1.NodeMaintenanceInProgress, corev1.NodeDrainInProgress} {
				if patched, err := Patch(ctx, c, live, tc.recent, "n1", set(ct)); err != nil || !patched {
					t.Fatalf("patch %s: patched %v, %v", ct, patched, err)
				}
			}
			if live.gets != tc.liveReads {
				t.Errorf("%d live reads of the node, want %d", live.gets, tc.liveReads)
			}
			got := &corev1.Node{}
			if err := store.Get(ctx, client.ObjectKeyFromObject(n), got); err != nil {
				t.Fatal(err)
			}
			if len(got.Status.Conditions) != 2 {
				t.Errorf("the node's conditions: %+v, want MaintenanceInProgress and DrainInProgress", got.Status.Conditions)
			}
		})
	}
}
