package e2e

import (
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/ledger"
	nmwebhook "github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/webhook"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// replicas are two webhook validators as two operator replicas run them:
// each with its own process memory, both reading and writing the real API
// server. Calling them directly spreads racing creates over both replicas
// for certain, which a Service in front of them would only do by chance.
func replicas(c *testcluster.Cluster, maxUnavailable *intstr.IntOrString) [2]*nmwebhook.Validator {
	var out [2]*nmwebhook.Validator
	for i := range out {
		out[i] = &nmwebhook.Validator{Reader: c.Client, Writer: c.Client, MaxUnavailable: maxUnavailable}
	}
	return out
}

// race asks the replicas, alternately and all at once, to admit one create
// per node in nodes, and returns the names admitted. Nothing is created:
// the test's cleanup takes the admissions out of the ledger again, so that
// they do not hold their nodes for ledger.TTL after the test.
func race(t *testing.T, c *testcluster.Cluster, v [2]*nmwebhook.Validator, nodes []string) []string {
	t.Helper()
	var (
		mu       sync.Mutex
		admitted []string
		wg       sync.WaitGroup
	)
	for i, node := range nodes {
		name := testcluster.UniqueName(t, "replica")
		wg.Add(1)
		go func() {
			defer wg.Done()
			nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node}}
			_, err := v[i%2].ValidateCreate(bg(), nm)
			switch {
			case err == nil:
				mu.Lock()
				admitted = append(admitted, name)
				mu.Unlock()
				t.Cleanup(func() {
					if err := (&ledger.Ledger{Reader: c.Client, Writer: c.Client}).Release(bg(), node, name); err != nil {
						t.Errorf("release the admission of %s: %v", name, err)
					}
				})
			case !strings.Contains(err.Error(), "already in maintenance") && !strings.Contains(err.Error(), "--max-unavailable"):
				t.Errorf("replica %d refused %s for node %s with an unexpected error: %v", i%2, name, node, err)
			}
		}()
	}
	wg.Wait()
	return admitted
}

// Four creates for one node racing through two replicas: exactly one is
// admitted, every round.
func TestReplicasAdmitOneCreatePerNode(t *testing.T) {
	c := testcluster.Get(t)
	pool := c.NewPool(t)
	v := replicas(c, nil)
	for round := range 20 {
		node := pool.AddNode(t, "").Name
		if admitted := race(t, c, v, []string{node, node, node, node}); len(admitted) != 1 {
			t.Fatalf("round %d: %d of 4 racing creates for node %s were admitted through two replicas (%v), want exactly 1", round, len(admitted), node, admitted)
		}
	}
}

// Six creates for six nodes racing through two replicas with room for two
// more maintenances: exactly two are admitted.
func TestReplicasHoldMaxUnavailable(t *testing.T) {
	c := testcluster.Get(t)
	var existing nmv1beta1.NodeMaintenanceList
	if err := c.Client.List(bg(), &existing); err != nil {
		t.Fatal(err)
	}
	limit := intstr.FromInt32(int32(len(existing.Items) + 2))
	v := replicas(c, &limit)
	pool := c.NewPool(t)
	var nodes []string
	for range 6 {
		nodes = append(nodes, pool.AddNode(t, "").Name)
	}
	if admitted := race(t, c, v, nodes); len(admitted) != 2 {
		t.Fatalf("%d of 6 racing creates were admitted through two replicas with --max-unavailable=%s and %d maintenances already (%v), want exactly 2",
			len(admitted), limit.String(), len(existing.Items), admitted)
	}
}
