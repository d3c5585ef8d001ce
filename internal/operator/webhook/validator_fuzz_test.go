package webhook

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	nmvalidation "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/ledger"
)

// The fuzz targets here check what the webhook promises against a model of
// the cluster, for sequences of creates, and against the rules of
// api/v1beta1/validation (fuzzed on their own there). Seeds live in
// testdata/fuzz/<target>/ and in f.Add.

func nmForFuzz(name, node, reason string, labels map[string]string) *nmv1beta1.NodeMaintenance {
	return &nmv1beta1.NodeMaintenance{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       nmv1beta1.NodeMaintenanceSpec{NodeName: node, Reason: reason},
	}
}

func FuzzValidateUpdate(f *testing.F) {
	f.Add("node01", "node01", "", "kernel upgrade", "")
	f.Add("node01", "node02", "x", "x", "a")
	f.Add("node01", "Node01", "", "", "")
	f.Add("node01", "node01 ", "", "", "")
	f.Add("", "node01", "", "", "")
	f.Add("Not_A_Node", "Not_A_Node", "", "", "")
	f.Add("硬體", "硬體", "\xff", "", "v")
	f.Add(strings.Repeat("a", 254), strings.Repeat("a", 253), "", "", "")
	f.Fuzz(func(t *testing.T, oldNode, newNode, oldReason, newReason, label string) {
		// No Reader: an update must be decided on the two objects alone.
		v := &Validator{}
		oldNM := nmForFuzz("nm", oldNode, oldReason, nil)
		newNM := nmForFuzz("nm", newNode, newReason, map[string]string{"l": label})
		newNM.Status = nmv1beta1.NodeMaintenanceStatus{Phase: nmv1beta1.MaintenanceRunning, LastError: label}
		oldCopy, newCopy := oldNM.DeepCopy(), newNM.DeepCopy()

		warnings, err := v.ValidateUpdate(context.Background(), oldNM, newNM)
		if warnings != nil {
			t.Fatalf("update returned warnings %v", warnings)
		}
		if !reflect.DeepEqual(oldNM, oldCopy) || !reflect.DeepEqual(newNM, newCopy) {
			t.Fatalf("ValidateUpdate changed its arguments")
		}
		if oldNode != newNode {
			if err == nil {
				t.Fatalf("update of spec.nodeName %q -> %q admitted", oldNode, newNode)
			}
			if err.Error() != ErrNodeNameImmutable || err.Error() != "updating spec.NodeName isn't allowed" {
				t.Fatalf("nodeName change refused with %q, want exactly %q", err, "updating spec.NodeName isn't allowed")
			}
		} else if err != nil {
			t.Fatalf("update keeping spec.nodeName %q (reason %q -> %q) refused: %v", oldNode, oldReason, newReason, err)
		}

		// The direction and everything but spec.nodeName are irrelevant.
		_, reverse := v.ValidateUpdate(context.Background(), newNM, oldNM)
		swapped := nmForFuzz("other", newNode, oldReason, nil)
		_, otherFields := v.ValidateUpdate(context.Background(), oldNM, swapped)
		if (reverse == nil) != (err == nil) || (otherFields == nil) != (err == nil) {
			t.Fatalf("outcome depends on more than spec.nodeName: %v, reversed %v, other fields %v", err, reverse, otherFields)
		}
	})
}

var fuzzScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := nmv1beta1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

var alreadyInMaintenance = regexp.MustCompile(`^node ".*" is already in maintenance by NodeMaintenance "(nm-[0-9])": `)

type admittedCreate struct {
	name, node string
	at         time.Time
}

// FuzzValidateCreateSequence runs a sequence of creates, deletes and clock
// steps through one Validator and a fake API server, and checks every answer
// against a model of the cluster:
//   - an admitted create names a valid, existing node that no stored
//     NodeMaintenance of another name holds, within --max-unavailable;
//   - the stored NodeMaintenances never share a node and never hold more
//     nodes than --max-unavailable allows;
//   - every refusal is one of the documented messages, names the node and is
//     justified by what is stored or was admitted less than ledger.TTL ago;
//   - a create that nothing stored or recently admitted stands in the way of
//     is admitted.
//
// ops is read two bytes at a time: the first byte's low two bits pick the
// operation (0, 1 create, 2 delete, 3 advance the clock), the next three the
// NodeMaintenance (nm-0..nm-7) and the top three the node: node0..node4 (the
// first nodeCount%6 exist), a node that does not exist, extraNode, or "". The
// second byte says how many half seconds the clock moves, or what becomes of
// an admitted create (low two bits): 0 it is lost (the API server timed out
// after admission), 1 it is stored at once, 2 or 3 it is stored only after
// the next admission request (two creates racing), before any other
// operation and before the clock moves.
func FuzzValidateCreateSequence(f *testing.F) {
	const lost, storedAtOnce, racing = 0, 1, 2
	create := func(nm, node int, fate byte) []byte { return []byte{byte(nm<<2 | node<<5), fate} }
	del := func(nm int) []byte { return []byte{byte(2 | nm<<2), 0} }
	wait := func(halfSeconds byte) []byte { return []byte{3, halfSeconds} }
	seq := func(ops ...[]byte) []byte { return slices.Concat(ops...) }
	f.Add("node07", uint8(3), "2", seq(create(0, 0, storedAtOnce), create(1, 0, storedAtOnce), create(1, 1, storedAtOnce), create(2, 2, storedAtOnce)))
	f.Add("node07", uint8(3), "", seq(create(0, 0, lost), create(1, 0, storedAtOnce), wait(21), create(1, 0, storedAtOnce), del(1), create(2, 0, storedAtOnce)))
	f.Add("edge.example.com", uint8(5), "40%", seq(create(0, 6, storedAtOnce), create(1, 1, storedAtOnce), create(2, 2, storedAtOnce), del(0), create(2, 2, storedAtOnce)))
	f.Add("Bad_Name", uint8(2), "abc", seq(create(0, 6, storedAtOnce), create(1, 7, storedAtOnce), create(2, 5, storedAtOnce), create(3, 0, storedAtOnce)))
	f.Add("n", uint8(1), "0", seq(create(0, 0, storedAtOnce), create(1, 6, storedAtOnce)))
	f.Add("x", uint8(4), "1", seq(create(0, 0, lost), create(1, 1, storedAtOnce), wait(20), create(1, 1, storedAtOnce), wait(1), create(1, 1, storedAtOnce), create(0, 0, storedAtOnce)))
	f.Add("node07", uint8(3), "2", seq(create(0, 0, racing), create(1, 0, racing), create(2, 1, racing), create(3, 2, storedAtOnce)))
	f.Fuzz(func(t *testing.T, extraNode string, nodeCount uint8, maxUnavailable string, ops []byte) {
		if len(ops) > 128 {
			ops = ops[:128]
		}
		var limit *intstr.IntOrString
		if maxUnavailable != "" {
			n, err := strconv.Atoi(maxUnavailable)
			v := intstr.FromString(maxUnavailable)
			if err == nil && n == int(int32(n)) {
				v = intstr.FromInt32(int32(n))
			}
			limit = &v
		}
		nodes := map[string]bool{}
		var objs []client.Object
		for i := 0; i < int(nodeCount%6); i++ {
			nodes[fmt.Sprintf("node%d", i)] = true
		}
		if nmvalidation.ValidateNodeName(extraNode) == nil {
			nodes[extraNode] = true
		}
		for name := range nodes {
			objs = append(objs, readyNode(name))
		}
		candidates := []string{"node0", "node1", "node2", "node3", "node4", "ghost", extraNode, ""}
		api := fake.NewClientBuilder().WithScheme(fuzzScheme).WithObjects(objs...).Build()
		now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		v := &Validator{Reader: api, Writer: api, MaxUnavailable: limit, Now: func() time.Time { return now }}
		ctx := context.Background()

		stored := map[string]string{} // NodeMaintenance name -> node, as the API server has them
		var admitted, inFlight []admittedCreate
		var lim int
		var limErr error
		if limit != nil {
			lim, limErr = nmvalidation.MaxUnavailableNodes(limit, len(nodes))
		}
		store := func(c admittedCreate) {
			if _, exists := stored[c.name]; exists {
				return // the API server refuses it: AlreadyExists
			}
			if err := api.Create(ctx, nmForFuzz(c.name, c.node, "", nil)); err != nil {
				t.Fatal(err)
			}
			stored[c.name] = c.node
			assertStoredWithinLimits(t, stored, lim, limit != nil && limErr == nil)
		}
		land := func() {
			for _, c := range inFlight {
				store(c)
			}
			inFlight = nil
		}
		defer land()
		for len(ops) >= 2 {
			a, b := ops[0], ops[1]
			ops = ops[2:]
			name := fmt.Sprintf("nm-%d", a>>2&7)
			node := candidates[a>>5&7]
			if a&3 >= 2 {
				land()
			}
			switch a & 3 {
			case 2:
				if _, ok := stored[name]; ok {
					if err := api.Delete(ctx, nmForFuzz(name, stored[name], "", nil)); err != nil {
						t.Fatal(err)
					}
					delete(stored, name)
				}
				continue
			case 3:
				now = now.Add(time.Duration(b) * 500 * time.Millisecond)
				continue
			}

			// What the API server holds as the request is admitted; racing
			// creates land right after.
			storedHolder, storedNodes := "", map[string]bool{}
			for n, nd := range stored {
				storedNodes[nd] = true
				if nd == node && n != name {
					storedHolder = n
				}
			}
			recentNodes := map[string]bool{} // what the validator may count: stored, or admitted within the TTL
			for nd := range storedNodes {
				recentNodes[nd] = true
			}
			for _, c := range admitted {
				if now.Sub(c.at) <= ledger.TTL {
					recentNodes[c.node] = true
				}
			}
			otherRecentNodes := len(recentNodes)
			if recentNodes[node] {
				otherRecentNodes--
			}
			// Nothing the validator can know of stands in the way.
			mustAdmit := storedHolder == "" && (limit == nil || limErr == nil && otherRecentNodes+1 <= lim)
			for _, c := range admitted {
				mustAdmit = mustAdmit && !(c.node == node && c.name != name && now.Sub(c.at) <= ledger.TTL)
			}
			warnings, err := v.ValidateCreate(ctx, nmForFuzz(name, node, "", nil))
			if warnings != nil {
				t.Fatalf("create returned warnings %v", warnings)
			}
			land()

			if nameErr := nmvalidation.ValidateNodeName(node); nameErr != nil {
				if err == nil || err.Error() != nameErr.Error() {
					t.Fatalf("create %s for %q: got %v, want the name refusal %v", name, node, err, nameErr)
				}
				continue
			}
			if !nodes[node] {
				if want := fmt.Sprintf("node %q does not exist: ", node); err == nil || !strings.HasPrefix(err.Error(), want) {
					t.Fatalf("create %s for missing node %q: got %v, want %q...", name, node, err, want)
				}
				continue
			}
			if err == nil {
				if storedHolder != "" {
					t.Fatalf("create %s for %q admitted while %s holds that node", name, node, storedHolder)
				}
				if limErr != nil {
					t.Fatalf("create %s admitted with an invalid --max-unavailable=%s (%v)", name, limit, limErr)
				}
				if limit != nil && !storedNodes[node] && len(storedNodes)+1 > lim {
					t.Fatalf("create %s for %q admitted with %d nodes already in maintenance and --max-unavailable=%s (%d)", name, node, len(storedNodes), limit, lim)
				}
				c := admittedCreate{name: name, node: node, at: now}
				admitted = append(admitted, c)
				switch b & 3 {
				case storedAtOnce:
					store(c)
				case racing, racing + 1:
					inFlight = append(inFlight, c)
				}
				continue
			}

			if mustAdmit {
				t.Fatalf("create %s for %q refused though no other NodeMaintenance holds it and %d other nodes are within --max-unavailable=%v: %v", name, node, otherRecentNodes, limit, err)
			}
			msg := err.Error()
			switch m := alreadyInMaintenance.FindStringSubmatch(msg); {
			case m != nil:
				holder := m[1]
				justified := holder != name && stored[holder] == node
				for _, c := range admitted {
					justified = justified || c.name == holder && holder != name && c.node == node && now.Sub(c.at) <= ledger.TTL
				}
				if !justified || !strings.HasPrefix(msg, fmt.Sprintf("node %q ", node)) {
					t.Fatalf("create %s for %q refused as held by %s, which neither holds it nor was admitted for it within %s: %q", name, node, holder, ledger.TTL, msg)
				}
			case limit != nil && limErr != nil:
				if msg != limErr.Error() {
					t.Fatalf("create %s with --max-unavailable=%s refused with %q, want %q", name, limit, msg, limErr)
				}
			case limit != nil && strings.Contains(msg, "more than --max-unavailable="):
				if storedNodes[node] || otherRecentNodes < lim {
					t.Fatalf("create %s for %q refused by --max-unavailable=%s (%d) with only %d other nodes stored or recently admitted: %q", name, node, limit, lim, otherRecentNodes, msg)
				}
				want := fmt.Sprintf("putting node %q into maintenance would make ", node)
				if !strings.HasPrefix(msg, want) || !strings.Contains(msg, fmt.Sprintf("of %d nodes unavailable, more than --max-unavailable=%s (%d) allows", len(nodes), limit, lim)) {
					t.Fatalf("limit refusal does not name the node, the node count and the limit: %q", msg)
				}
			default:
				t.Fatalf("create %s for %q refused with an unexpected error: %v", name, node, err)
			}
		}
	})
}

// assertStoredWithinLimits is the safety property of the webhook: what the
// API server stores never has two NodeMaintenances for one node, nor more
// nodes in maintenance than the limit.
func assertStoredWithinLimits(t *testing.T, stored map[string]string, lim int, limited bool) {
	t.Helper()
	holders := map[string]string{}
	for name, node := range stored {
		if other, ok := holders[node]; ok {
			t.Fatalf("node %q is held by both %s and %s", node, other, name)
		}
		holders[node] = name
	}
	if limited && len(holders) > lim {
		t.Fatalf("%d nodes in maintenance, more than the limit %d: %v", len(holders), lim, stored)
	}
}
