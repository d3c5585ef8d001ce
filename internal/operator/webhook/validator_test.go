package webhook

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/lease"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/ledger"
)

func nm(name, node string) *nmv1beta1.NodeMaintenance {
	return &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node}}
}

func TestValidateUpdateRefusesNodeNameChangeWithExactMessage(t *testing.T) {
	v := &Validator{}
	_, err := v.ValidateUpdate(context.Background(), nm("a", "node01"), nm("a", "node02"))
	if err == nil || err.Error() != "updating spec.NodeName isn't allowed" {
		t.Fatalf("got %v", err)
	}
	changedReason := nm("a", "node01")
	changedReason.Spec.Reason = "x"
	if _, err := v.ValidateUpdate(context.Background(), nm("a", "node01"), changedReason); err != nil {
		t.Fatalf("reason change refused: %v", err)
	}
}

func TestValidateCreate(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = nmv1beta1.AddToScheme(scheme)
	nodes := []runtime.Object{
		readyNode("node01"), readyNode("node02"), readyNode("node03"),
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(append(nodes, nm("existing", "node01"))...).Build()
	one := intstr.FromInt32(2)
	v := &Validator{Reader: reader, Writer: reader, MaxUnavailable: &one}

	tests := []struct {
		name, node, wantErr string
	}{
		{"unknown node", "node09", `node "node09" does not exist`},
		{"bad name", "Node02", "is not a valid node name"},
		{"empty", "", "spec.nodeName is required"},
		{"already in maintenance", "node01", `node "node01" is already in maintenance by NodeMaintenance "existing"`},
		{"first free node", "node02", ""},
		{"second create for the same node before the API shows the first", "node02", `already in maintenance by NodeMaintenance "first-free-node"`},
		{"over the limit", "node03", "--max-unavailable=2 (2) allows; nodes already in maintenance: node01 (existing), node02 (first-free-node)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := strings.ReplaceAll(strings.ToLower(tt.name), " ", "-")
			if len(name) > 20 {
				name = name[:15]
			}
			_, err := v.ValidateCreate(context.Background(), nm(name, tt.node))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// readyNode is a Ready, schedulable Node: the guards count it as a node
// that takes pods.
func readyNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

// Creates that arrive while a decision is being made are decided together
// in the next one, in one write of the ledger, with the same answers as one
// by one: two creates for one node, the second refused.
func TestValidateCreateDecidesConcurrentCreatesTogether(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = nmv1beta1.AddToScheme(scheme)
	const nodes = 5
	var objs []runtime.Object
	for i := range nodes {
		objs = append(objs, readyNode(fmt.Sprintf("node%02d", i)))
	}
	release := make(chan struct{})
	var ledgerReads, ledgerWrites atomic.Int32
	reader := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*coordinationv1.Lease); ok && ledgerReads.Add(1) == 1 {
				<-release // the first decision waits until every other create queued behind it
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*coordinationv1.Lease); ok {
				ledgerWrites.Add(1)
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if _, ok := obj.(*coordinationv1.Lease); ok {
				ledgerWrites.Add(1)
			}
			return c.Update(ctx, obj, opts...)
		},
	}).Build()
	v := &Validator{Reader: reader, Writer: reader}

	first := make(chan error, 1)
	go func() {
		_, err := v.ValidateCreate(context.Background(), nm("first", "node00"))
		first <- err
	}()
	for ledgerReads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	// Two creates for each of the other nodes, queued behind the first.
	errs := make(map[string]chan error)
	for i := 1; i < nodes; i++ {
		for _, suffix := range []string{"a", "b"} {
			name := fmt.Sprintf("node%02d-%s", i, suffix)
			ch := make(chan error, 1)
			errs[name] = ch
			go func() {
				_, err := v.ValidateCreate(context.Background(), nm(name, fmt.Sprintf("node%02d", i)))
				ch <- err
			}()
		}
	}
	for {
		v.pendingMu.Lock()
		n := len(v.pending)
		v.pendingMu.Unlock()
		if n == 2*(nodes-1) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first create refused: %v", err)
	}
	admitted := map[string]string{}
	for name, ch := range errs {
		node := name[:len("node00")]
		switch err := <-ch; {
		case err == nil:
			if other, ok := admitted[node]; ok {
				t.Errorf("%s and %s both admitted for %s", other, name, node)
			}
			admitted[node] = name
		case !strings.Contains(err.Error(), "is already in maintenance by NodeMaintenance"):
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(admitted) != nodes-1 {
		t.Errorf("admitted %v, want one create for each of the %d other nodes", admitted, nodes-1)
	}
	if got := ledgerWrites.Load(); got != 2 {
		t.Errorf("%d ledger writes for 9 creates arriving during one decision, want 2 (that decision, and one for the rest)", got)
	}
}

// The NodeMaintenances are read from the watch cache first; a refusal it
// would cause (a maintenance the cache still shows, although it is gone) is
// decided again on a consistent list.
func TestValidateCreateConfirmsARefusalOnAConsistentList(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = nmv1beta1.AddToScheme(scheme)
	cachedLists, consistentLists := 0, 0
	reader := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(readyNode("node01"), readyNode("node02")).
		WithInterceptorFuncs(interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				nms, ok := list.(*nmv1beta1.NodeMaintenanceList)
				if !ok {
					return c.List(ctx, list, opts...)
				}
				o := &client.ListOptions{}
				o.ApplyOptions(opts)
				if o.Raw != nil && o.Raw.ResourceVersion == "0" {
					cachedLists++
					// The watch cache still shows a maintenance deleted moments ago.
					nms.Items = []nmv1beta1.NodeMaintenance{*nm("gone", "node01")}
					return nil
				}
				consistentLists++
				return c.List(ctx, list, opts...)
			},
		}).Build()
	v := &Validator{Reader: reader, Writer: reader}
	if _, err := v.ValidateCreate(context.Background(), nm("free", "node02")); err != nil {
		t.Fatalf("create for node02 refused: %v", err)
	}
	if cachedLists != 1 || consistentLists != 0 {
		t.Errorf("an admission read %d cached and %d consistent lists, want 1 and 0", cachedLists, consistentLists)
	}
	if _, err := v.ValidateCreate(context.Background(), nm("again", "node01")); err != nil {
		t.Fatalf("create for node01 refused on the cache's stale view: %v", err)
	}
	if consistentLists != 1 {
		t.Errorf("%d consistent lists, want 1 to confirm the refusal the cache suggested", consistentLists)
	}
}

// With an informer cache for the nodes, the guard reads the nodes there, not
// live.
func TestValidateCreateGuardReadsTheNodeCache(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = nmv1beta1.AddToScheme(scheme)
	cordoned := readyNode("node02")
	cordoned.Spec.Unschedulable = true
	live := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(readyNode("node01"), readyNode("node02")).Build()
	cache := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(readyNode("node01"), cordoned).Build()
	v := &Validator{Reader: live, Writer: live, Cache: cache}
	_, err := v.ValidateCreate(context.Background(), nm("a", "node01"))
	if err == nil || !strings.Contains(err.Error(), "is the last schedulable node") {
		t.Fatalf("got %v, want the refusal the cached nodes call for", err)
	}
}

// The node of a create is read from the node cache, without a request; a
// node the cache does not have yet (joined moments ago) is read live before
// the create is refused for it.
func TestValidateCreateReadsTheNodeFromTheCacheThenLive(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = nmv1beta1.AddToScheme(scheme)
	var liveNodeGets []string
	live := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(readyNode("node01"), readyNode("node02"), readyNode("node03")).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Node); ok {
				liveNodeGets = append(liveNodeGets, key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	cache := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(readyNode("node01"), readyNode("node02")).Build()
	v := &Validator{Reader: live, Writer: live, Cache: cache}
	ctx := context.Background()
	if _, err := v.ValidateCreate(ctx, nm("a", "node01")); err != nil {
		t.Fatalf("create for a cached node: %v", err)
	}
	if len(liveNodeGets) != 0 {
		t.Errorf("live node reads for a cached node: %v, want none", liveNodeGets)
	}
	if _, err := v.ValidateCreate(ctx, nm("b", "node03")); err != nil {
		t.Fatalf("create for a node only the API server has yet: %v", err)
	}
	if !slices.Equal(liveNodeGets, []string{"node03"}) {
		t.Errorf("live node reads %v, want node03's", liveNodeGets)
	}
	_, err := v.ValidateCreate(ctx, nm("c", "node04"))
	if err == nil || !strings.Contains(err.Error(), `node "node04" does not exist`) {
		t.Fatalf("create for a node nobody has: %v, want it refused as missing", err)
	}
}

// The ledger this replica remembers may still hold an entry another replica
// released: a refusal it suggests is decided again on the ledger read live.
func TestValidateCreateConfirmsARefusalOnTheLiveLedger(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = nmv1beta1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(readyNode("node01"), readyNode("node02")).Build()
	v := &Validator{Reader: c, Writer: c}
	ctx := context.Background()
	if _, err := v.ValidateCreate(ctx, nm("first", "node01")); err != nil {
		t.Fatalf("first create: %v", err)
	}
	// first was never stored (say its create failed after admission), and
	// the controller of another replica released its entry.
	other := &ledger.Ledger{Reader: c, Writer: c}
	if err := other.Release(ctx, "node01", "first"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.ValidateCreate(ctx, nm("second", "node01")); err != nil {
		t.Fatalf("create refused on this replica's stale memory of the ledger: %v", err)
	}
	// And an entry that still holds its node still refuses.
	if _, err := v.ValidateCreate(ctx, nm("third", "node01")); err == nil || !strings.Contains(err.Error(), `by NodeMaintenance "second"`) {
		t.Fatalf("create for a node the ledger holds: %v, want it refused", err)
	}
}

// warmed records the nodes the validator warms.
type warmed struct{ got []string }

func (w *warmed) Warm(holder, node string, ttl time.Duration) {
	w.got = append(w.got, fmt.Sprintf("%s %s %v", holder, node, ttl))
}

// A server-side dry run is decided as a create, and records nothing: no
// ledger entry holds the node against another create, and no informer of
// its pods is started. An admitted create warms its node's pods.
func TestValidateCreateOfADryRunRecordsNothing(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = nmv1beta1.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(readyNode("node01"), readyNode("node02")).Build()
	w := &warmed{}
	v := &Validator{Reader: c, Writer: c, Pods: w}
	dry := admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{DryRun: ptr.To(true)}})
	real := admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{DryRun: ptr.To(false)}})

	if _, err := v.ValidateCreate(dry, nm("dry", "node01")); err != nil {
		t.Fatalf("dry run refused: %v", err)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: lease.Namespace, Name: ledger.LedgerName}, &coordinationv1.Lease{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the admission ledger after a dry run: %v, want none written", err)
	}
	if _, err := v.ValidateCreate(real, nm("real", "node01")); err != nil {
		t.Fatalf("a create after another name's dry run for the same node refused: %v", err)
	}
	if want := []string{"admission/real node01 10s"}; !slices.Equal(w.got, want) {
		t.Errorf("warmed %q, want %q", w.got, want)
	}
	_, err := v.ValidateCreate(dry, nm("dry-again", "node01"))
	if err == nil || !strings.Contains(err.Error(), `already in maintenance by NodeMaintenance "real"`) {
		t.Errorf("dry run for a node just admitted: %v, want the refusal a create gets", err)
	}
	if len(w.got) != 1 {
		t.Errorf("warmed %q after a dry run, want only the admitted create's node", w.got)
	}
}
