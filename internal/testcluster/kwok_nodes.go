package testcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
)

// kwok's configuration for the cluster, and its spare node.

// kwokParallelismConfig is a kwokctl config document that sets kwok's
// parallelism of pod stages, node stages and node leases to n.
func kwokParallelismConfig(n uint) string {
	return fmt.Sprintf(`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: %[1]d
  nodePlayStageParallelism: %[1]d
  nodeLeaseParallelism: %[1]d
`, n)
}

// addSpareNode creates SpareNode and waits until kwok reports it Ready.
func (c *Cluster) addSpareNode(ctx context.Context) error {
	if err := c.Client.Create(ctx, FakeNode(SpareNode, nil)); err != nil {
		return fmt.Errorf("cluster %s: create the spare node: %w", c.Name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		node := &corev1.Node{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: SpareNode}, node); err != nil {
			return false, nil
		}
		return validation.NodeReady(node), nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: the spare node %s never became Ready: %w", c.Name, SpareNode, err)
	}
	return nil
}
