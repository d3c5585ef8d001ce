package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// LimitDrain is the physical limit of a drain on this cluster, the yardstick
// of the benchmarks, not part of the operator: cordon, evict every pod of the
// node at once, and retry a refused eviction (429, a PodDisruptionBudget) the
// moment a pod or a budget changes; done when no pod but DaemonSet and mirror
// pods is left. Its watches are started by NewLimitDrainer, before the clock
// runs, as the operator's caches are.
type LimitDrainer struct {
	cs      kubernetes.Interface
	node    string
	factory informers.SharedInformerFactory
	pods    cache.SharedIndexInformer
	changed chan struct{}
	stop    chan struct{}
}

// NewLimitDrainer starts the watches of one node's pods and of the budgets.
func NewLimitDrainer(ctx context.Context, cs kubernetes.Interface, node string) (*LimitDrainer, error) {
	d := &LimitDrainer{cs: cs, node: node, changed: make(chan struct{}, 1), stop: make(chan struct{})}
	d.pods = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "spec.nodeName=" + node
	})).Core().V1().Pods().Informer()
	d.factory = informers.NewSharedInformerFactory(cs, 0)
	pdbs := d.factory.Policy().V1().PodDisruptionBudgets().Informer()
	notify := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { d.poke() },
		UpdateFunc: func(any, any) { d.poke() },
		DeleteFunc: func(any) { d.poke() },
	}
	for _, inf := range []cache.SharedIndexInformer{d.pods, pdbs} {
		if _, err := inf.AddEventHandler(notify); err != nil {
			return nil, err
		}
	}
	go d.pods.Run(d.stop)
	d.factory.Start(d.stop)
	if !cache.WaitForCacheSync(ctx.Done(), d.pods.HasSynced, pdbs.HasSynced) {
		d.Close()
		return nil, fmt.Errorf("limit loop: the pod and PodDisruptionBudget watches did not sync")
	}
	return d, nil
}

func (d *LimitDrainer) poke() {
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

// Close stops the watches.
func (d *LimitDrainer) Close() {
	close(d.stop)
	d.factory.Shutdown()
}

// Drain cordons the node and evicts its pods as fast as the cluster allows.
func (d *LimitDrainer) Drain(ctx context.Context) error {
	patch := []byte(`{"spec":{"unschedulable":true}}`)
	if _, err := d.cs.CoreV1().Nodes().Patch(ctx, d.node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("cordon %s: %w", d.node, err)
	}
	evicted := map[types.UID]bool{}
	for {
		var todo []*corev1.Pod
		left := 0
		for _, obj := range d.pods.GetStore().List() {
			pod := obj.(*corev1.Pod)
			if pod.Spec.NodeName != d.node || stays(pod) {
				continue
			}
			left++
			if pod.DeletionTimestamp == nil && !evicted[pod.UID] {
				todo = append(todo, pod)
			}
		}
		if left == 0 {
			return nil
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		var firstErr error
		for _, pod := range todo {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := d.cs.PolicyV1().Evictions(pod.Namespace).Evict(ctx, &policyv1.Eviction{
					ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil || apierrors.IsNotFound(err):
					evicted[pod.UID] = true
				case apierrors.IsTooManyRequests(err):
					// The budget refuses for now: retry on the next change.
				case firstErr == nil:
					firstErr = fmt.Errorf("evict %s/%s: %w", pod.Namespace, pod.Name, err)
				}
			}()
		}
		wg.Wait()
		if firstErr != nil {
			return firstErr
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-d.changed:
		case <-time.After(time.Second): // a change the watches could not see
		}
	}
}

// stays: DaemonSet and mirror pods are not drained, by any of the sides.
func stays(pod *corev1.Pod) bool {
	if _, mirror := pod.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return true
	}
	for _, ref := range pod.OwnerReferences {
		if ref.Controller != nil && *ref.Controller && ref.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}
