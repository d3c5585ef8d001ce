package live

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/drain"
)

// countReader answers every list with one item of total and records the
// options of each list.
type countReader struct {
	client.Reader
	total int64
	asked []client.ListOptions
}

func (r *countReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := client.ListOptions{}
	o.ApplyOptions(opts)
	r.asked = append(r.asked, o)
	list.(*corev1.PodList).Items = make([]corev1.Pod, 1)
	if r.total > 1 {
		list.SetContinue("more")
		list.SetRemainingItemCount(ptr.To(r.total - 1))
	}
	return nil
}

// A count asks for one item, consistently, or from the watch cache at any
// version not older than the first when the bounds say so: not at
// resourceVersion 0, for which the API server ignores the limit and sends
// every pod of the cluster.
func TestWithinCountsFromTheWatchCacheWhenAsked(t *testing.T) {
	for _, tt := range []struct {
		bounds       Bounds
		total        int64
		small        bool
		version      string
		versionMatch metav1.ResourceVersionMatch
	}{
		{Bounds{Pods: 500}, 500, true, "", ""},
		{Bounds{Pods: 500}, 501, false, "", ""},
		{Bounds{Pods: 500, FromWatchCache: true}, 500, true, "1", metav1.ResourceVersionMatchNotOlderThan},
		{Bounds{Pods: 500, FromWatchCache: true}, 501, false, "1", metav1.ResourceVersionMatchNotOlderThan},
	} {
		r := &countReader{total: tt.total}
		small, err := reader{r: r, b: tt.bounds}.within(context.Background(), &corev1.PodList{}, tt.bounds.Pods, client.InNamespace("ns"))
		if err != nil || small != tt.small {
			t.Errorf("%+v, %d pods: within %v %v, want %v", tt.bounds, tt.total, small, err, tt.small)
		}
		if len(r.asked) != 1 {
			t.Fatalf("%+v: %d lists, want 1", tt.bounds, len(r.asked))
		}
		o := r.asked[0]
		var version string
		var match metav1.ResourceVersionMatch
		if o.Raw != nil {
			version, match = o.Raw.ResourceVersion, o.Raw.ResourceVersionMatch
		}
		if o.Limit != 1 || o.Namespace != "ns" || version != tt.version || match != tt.versionMatch {
			t.Errorf("%+v: listed with limit %d, namespace %q, resourceVersion %q (%q); want limit 1 in ns at %q (%q)",
				tt.bounds, o.Limit, o.Namespace, version, match, tt.version, tt.versionMatch)
		}
	}
}

// AnyVersion asks for resourceVersion 0 on a list and on a get alike, and
// keeps the other options it is given with.
func TestAnyVersionOnListsAndGets(t *testing.T) {
	list := &client.ListOptions{}
	list.ApplyOptions([]client.ListOption{client.Limit(5), AnyVersion})
	if list.Raw == nil || list.Raw.ResourceVersion != "0" || list.Limit != 5 {
		t.Errorf("list options %+v, raw %+v: want resourceVersion 0 and the limit kept", list, list.Raw)
	}
	get := &client.GetOptions{}
	get.ApplyOptions([]client.GetOption{AnyVersion})
	if get.Raw == nil || get.Raw.ResourceVersion != "0" {
		t.Errorf("get options raw %+v: want resourceVersion 0", get.Raw)
	}
}

// In a cluster beyond the bounds, the outage check reads what
// drain.OutageReadsOf asks for: the StatefulSet of a pod to evict, and the
// pods of a namespace only where a pod's controller keeps no count of ready
// replicas (a Job's). The namespaces of ReplicaSet, StatefulSet and bare
// pods are not listed, however many pods they hold, and the preview finds
// the Deployment whose one ready replica is on the node from its ReplicaSet's
// status.
func TestReadForBeyondTheBoundsReadsWorkloadStatus(t *testing.T) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	controller := func(kind, apiVersion, name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{Kind: kind, APIVersion: apiVersion, Name: name, Controller: ptr.To(true)}}
	}
	readyPod := func(ns, name string, owners []metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: owners},
			Spec: corev1.PodSpec{NodeName: "n0"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
	}
	objs := []client.Object{
		readyPod("shop", "web-1-x", controller("ReplicaSet", "apps/v1", "web-1")),
		readyPod("shop", "db-0", controller("StatefulSet", "apps/v1", "db")),
		readyPod("lonely", "bare", nil),
		readyPod("batch", "job-x", controller("Job", "batch/v1", "job")),
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", OwnerReferences: controller("Deployment", "apps/v1", "web")},
			Status: appsv1.ReplicaSetStatus{ReadyReplicas: 1}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db"}, Status: appsv1.StatefulSetStatus{ReadyReplicas: 2}},
	}
	var podLists []string
	r := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*corev1.PodList); ok {
				o := client.ListOptions{}
				o.ApplyOptions(opts)
				podLists = append(podLists, fmt.Sprintf("namespace %q fields %v", o.Namespace, o.FieldSelector))
				if o.FieldSelector != nil && strings.Contains(o.FieldSelector.String(), "status.phase") {
					return c.List(ctx, list, client.InNamespace(o.Namespace)) // the fake client knows no "!=": every pod here runs
				}
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n0"}}
	beyond := []corev1.Node{*node, {ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "n2"}}}
	in, err := ReadFor(context.Background(), r, Known{Node: node, Nodes: beyond}, Bounds{Nodes: 2, Pods: 500, FromWatchCache: true})
	if err != nil {
		t.Fatal(err)
	}
	if in.NoCapacity == "" {
		t.Fatal("a cluster of 3 nodes beyond the bound of 2 got a capacity estimate")
	}
	for _, l := range podLists {
		if strings.Contains(l, `"shop"`) || strings.Contains(l, `"lonely"`) {
			t.Errorf("listed the pods of a namespace the workload status or nothing answers for: %s", l)
		}
	}
	if !slices.ContainsFunc(podLists, func(l string) bool { return strings.Contains(l, `"batch"`) }) {
		t.Errorf("pod lists %q: want the Job's namespace batch listed", podLists)
	}
	if !slices.Equal(in.ByStatus, []string{"shop"}) || len(in.StatefulSets) != 1 || in.StatefulSets[0].Status.ReadyReplicas != 2 {
		t.Fatalf("ByStatus %v, StatefulSets %+v: want shop, and StatefulSet shop/db as read", in.ByStatus, in.StatefulSets)
	}
	in.Now = time.Unix(5000, 0)
	p, err := drain.NewPreview(in)
	if err != nil {
		t.Fatal(err)
	}
	var outages []string
	for _, risk := range p.Risks {
		if risk.Kind == drain.RiskOutage {
			outages = append(outages, risk.Subject)
		}
	}
	// The Job's namespace was listed: job-x is its only pod, so an outage.
	if want := []string{"Deployment shop/web", "Job batch/job"}; !slices.Equal(outages, want) {
		t.Errorf("outages %q, want %q (StatefulSet shop/db has a second ready replica elsewhere)", outages, want)
	}
}
