package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/notify"
)

func describe(ts []transition) string {
	var s []string
	for _, t := range ts {
		e := string(t.event)
		if t.row != nil {
			e += " " + t.row.Name
		}
		s = append(s, e)
	}
	return strings.Join(s, ", ")
}

// Each write's transitions, in the order they are sent.
func TestTransitionsOfAWrite(t *testing.T) {
	at := &metav1.Time{Time: now}
	restored := func(r nmv1alpha1.RolloutNode) nmv1alpha1.RolloutNode { r.RestoredAt = at; return r }
	st := func(phase nmv1alpha1.RolloutPhase, blockers []string, nodes ...nmv1alpha1.RolloutNode) *nmv1alpha1.NodeMaintenanceRolloutStatus {
		return &nmv1alpha1.NodeMaintenanceRolloutStatus{Phase: phase, Blockers: blockers, Nodes: nodes}
	}
	row := func(name string, s nmv1alpha1.RolloutNodeState) nmv1alpha1.RolloutNode {
		return nmv1alpha1.RolloutNode{Name: name, State: s}
	}
	const W, D, R, S, Done, F = nmv1alpha1.NodeWaiting, nmv1alpha1.NodeDraining, nmv1alpha1.NodeRestoring, nmv1alpha1.NodeSoaking, nmv1alpha1.NodeDone, nmv1alpha1.NodeFailed
	const P, H, OK = nmv1alpha1.RolloutProgressing, nmv1alpha1.RolloutHalted, nmv1alpha1.RolloutSucceeded
	held := []string{"node b waits for NodeMaintenance theirs"}
	for _, tt := range []struct {
		name          string
		before, after *nmv1alpha1.NodeMaintenanceRolloutStatus
		want          string
	}{
		{"the set resolved, the first node started, the second held", st("", nil), st(P, held, row("a", D), row("b", W)), "Started, Blocked"},
		{"the set resolved, nothing started", st("", nil), st(P, nil, row("a", W)), ""},
		{"a second node starts", st(P, nil, row("a", D), row("b", W)), st(P, nil, row("a", D), row("b", D)), ""},
		{"the same blockers", st(P, held, row("a", D)), st(P, held, row("a", D)), ""},
		{"other blockers", st(P, held, row("a", D)), st(P, []string{"outside the window"}, row("a", D)), "Blocked"},
		{"blockers gone", st(P, held, row("a", D)), st(P, nil, row("a", D)), ""},
		{"restored and soaking", st(P, nil, row("a", R)), st(P, nil, restored(row("a", S))), "Restored a"},
		{"restored and done at once", st(P, nil, row("a", R), row("b", R)), st(P, nil, restored(row("a", Done)), restored(row("b", Done))),
			"Restored a, NodeDone a, Restored b, NodeDone b"},
		{"done after the soak", st(P, nil, restored(row("a", S))), st(P, nil, restored(row("a", Done))), "NodeDone a"},
		{"the last node done", st(P, nil, restored(row("a", S))), st(OK, nil, restored(row("a", Done))), "NodeDone a, Succeeded"},
		{"a node failed, the rollout halts", st(P, nil, row("a", D), row("b", W)), st(H, nil, row("a", F), row("b", W)), "NodeFailed a, Halted"},
		{"still halted", st(H, nil, row("a", F)), st(H, nil, row("a", F)), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := describe(transitions(tt.before, tt.after)); got != tt.want {
				t.Errorf("transitions = %q, want %q", got, tt.want)
			}
		})
	}
}

// collector is a receiver that records the events it gets.
type collector struct {
	mu     sync.Mutex
	events []map[string]any
	got    chan struct{}
}

func newCollector(t *testing.T) (*collector, string) {
	c := &collector{got: make(chan struct{}, 100)}
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, req *http.Request) {
		e := map[string]any{}
		_ = json.NewDecoder(req.Body).Decode(&e)
		c.mu.Lock()
		c.events = append(c.events, e)
		c.mu.Unlock()
		c.got <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	return c, srv.URL
}

// A pass that loses its status write to a conflict sends nothing; the
// pass that wins sends each event once, filtered by spec.notify[].events.
func TestNotificationsFollowTheWinningWriteOnly(t *testing.T) {
	received, url := newCollector(t)
	ro := &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "ro", UID: "u1"}, Spec: nmv1alpha1.NodeMaintenanceRolloutSpec{
		NodeNames: []string{"a"},
		Notify:    []nmv1alpha1.Notification{{URL: url, Events: []nmv1alpha1.NotificationEvent{nmv1alpha1.EventStarted, nmv1alpha1.EventHalted}}},
	}}
	conflicts := 1
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ro).WithStatusSubresource(ro).WithInterceptorFuncs(interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if conflicts > 0 {
				conflicts--
				return apierrors.NewConflict(schema.GroupResource{Resource: "nodemaintenancerollouts"}, obj.GetName(), fmt.Errorf("changed"))
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}).Build()
	sender, err := notify.New(notify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &RolloutReconciler{Client: c, APIReader: c, Scheme: c.Scheme(), Recorder: events.NewFakeRecorder(100), Now: func() time.Time { return now }, Notify: sender}
	pass := func() *scope {
		live := &nmv1alpha1.NodeMaintenanceRollout{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: "ro"}, live); err != nil {
			t.Fatal(err)
		}
		s := &scope{ro: live, status: live.Status.DeepCopy(), old: live.Status.DeepCopy(), now: now}
		s.status.Nodes = []nmv1alpha1.RolloutNode{{Name: "a", State: nmv1alpha1.NodeDraining}}
		s.status.Phase = nmv1alpha1.RolloutProgressing
		s.status.Blockers = []string{"outside the window"} // Blocked is not among the events
		if _, err := r.writeStatus(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	if lost := pass(); !lost.ended {
		t.Fatal("the pass whose write met a conflict went on")
	}
	won := pass()
	select {
	case <-received.got:
	case <-time.After(time.Minute):
		t.Fatal("no event after the winning write")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = sender.Start(ctx) // delivers anything else queued before it returns
	received.mu.Lock()
	defer received.mu.Unlock()
	var types []any
	for _, e := range received.events {
		types = append(types, e["type"], e["id"])
	}
	want := []any{notify.RolloutStarted, "u1/" + won.ro.ResourceVersion + "/rollout.started"}
	if !slices.Equal(types, want) {
		t.Errorf("received %v, want %v", types, want)
	}
}
