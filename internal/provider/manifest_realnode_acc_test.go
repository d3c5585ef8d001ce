package provider_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/provider"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// TestAccManifestOnRealNode installs the operator without Terraform, as the
// release's deploy/node-maintenance-operator.yaml is meant to be installed:
// `kubectl apply --server-side -f`, on a cluster whose only node at that
// moment is kubelet-run, with no cert-manager. It checks that this gives a
// working operator: the Deployment available on the real node, the webhook
// certificates issued by the operator's cert-controller, the webhook
// refusing a bad NodeMaintenance with its own message, and a maintenance of
// a fake node that reaches Succeeded and is restored on deletion.
//
// Then it proves the manifest is the resource's default installation on the
// live objects: `kubectl apply --server-side -k deploy` changes nothing, and
// the nodemaintenance_operator resource's own apply with every attribute at
// its default (planned through the plugin protocol) changes nothing either:
// no object's generation moves, the operator's pods stay, and for every
// object the fields the provider's field manager applied are exactly those
// kubectl applied (server-side apply records them per manager; a field with
// another value would have moved to the provider, a field more or less
// would show in its set).
//
// The manifest names the release image; the node gets this tree's image
// under that name, as `make image` tags it.
func TestAccManifestOnRealNode(t *testing.T) {
	c := testcluster.StartReal(t, "manifest", testcluster.Options{RealNodes: 1, KubeProxy: true})
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	deploy := filepath.Join(root, "deploy")
	manifest := filepath.Join(deploy, config.ManifestFile)
	real01 := c.RealNodes[0]
	if err := real01.ImportImage(context.Background(), buildOperatorImage(t, config.DefaultImage, "")); err != nil {
		t.Fatal(err)
	}
	ns := config.DefaultNamespace

	start := time.Now()
	kubectlT(t, c, "apply", "--server-side", "-f", manifest)
	testcluster.WaitFor(t, 4*time.Minute, "the operator Deployment available", func(ctx context.Context) (bool, error) {
		return deploymentAvailable(ctx, c, ns)
	})
	t.Logf("operator available %s after kubectl apply (the webhook certificate's trip through the kubelet)", time.Since(start).Round(10*time.Millisecond))
	for _, check := range []func() error{
		func() error { return operatorRunsOn(c, ns, real01, config.DefaultImage, config.DefaultReplicas)(nil) },
		func() error { return webhookThroughService(c, ns)(nil) },
	} {
		if err := check(); err != nil {
			t.Fatal(err)
		}
	}
	maintainFakeNode(t, c, "fake-manifest")

	objs := manifestObjects(t, manifest)
	before := liveContents(t, c, objs)
	pods := operatorPodNames(t, c, ns)
	kubectlT(t, c, "apply", "--server-side", "-k", deploy)
	provider.ApplyDefaultOperator(t, c.RESTConfig, 3*time.Minute)
	sameAsTheResource(t, c, objs, before)
	if now := operatorPodNames(t, c, ns); !slices.Equal(now, pods) {
		t.Errorf("operator pods %v after the applies, %v before: an apply changed the Deployment's pods", now, pods)
	}
}

func kubectlT(t *testing.T, c *testcluster.Cluster, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := c.Kubectl(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl %v:\n%s", args, out)
}

func deploymentAvailable(ctx context.Context, c *testcluster.Cluster, ns string) (bool, error) {
	dep := &appsv1.Deployment{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: config.OperatorName}, dep); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	for _, cond := range dep.Status.Conditions {
		if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue {
			return dep.Status.AvailableReplicas >= config.DefaultReplicas, nil
		}
	}
	return false, nil
}

// maintainFakeNode adds a fake node, maintains it to Succeeded, deletes the
// maintenance and waits until the operator restored the node and let the
// NodeMaintenance go.
func maintainFakeNode(t *testing.T, c *testcluster.Cluster, name string) {
	t.Helper()
	node := c.AddNode(t, name, nil)
	nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node.Name, Reason: "installed from the manifest"}}
	if err := c.Client.Create(context.Background(), nm); err != nil {
		t.Fatalf("create a NodeMaintenance of %s through the webhook: %v", node.Name, err)
	}
	testcluster.WaitFor(t, 2*time.Minute, "NodeMaintenance "+name+" Succeeded", func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(nm), nm)
		return err == nil && nm.Status.Phase == nmv1beta1.MaintenanceSucceeded, err
	})
	if err := c.Client.Delete(context.Background(), nm); err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, 2*time.Minute, "NodeMaintenance "+name+" gone and its node schedulable", func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(nm), nm); !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		n := &corev1.Node{}
		err := c.Client.Get(ctx, client.ObjectKey{Name: node.Name}, n)
		return err == nil && !n.Spec.Unschedulable, err
	})
}

// manifestObjects reads the manifest's objects (kind and name are enough to
// find them in the cluster).
func manifestObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

func liveObject(t *testing.T, c *testcluster.Cluster, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(obj.GroupVersionKind())
	if err := c.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), live); err != nil {
		t.Fatalf("read %s %s: %v", obj.GetKind(), client.ObjectKeyFromObject(obj), err)
	}
	return live
}

// liveContents reads every object as it is in the cluster, without what
// changes by itself (status) or with every write (resourceVersion,
// managedFields); metadata.generation stays, so a changed spec shows.
func liveContents(t *testing.T, c *testcluster.Cluster, objs []*unstructured.Unstructured) map[string]map[string]any {
	t.Helper()
	contents := map[string]map[string]any{}
	for _, o := range objs {
		live := liveObject(t, c, o)
		unstructured.RemoveNestedField(live.Object, "status")
		unstructured.RemoveNestedField(live.Object, "metadata", "resourceVersion")
		unstructured.RemoveNestedField(live.Object, "metadata", "managedFields")
		contents[o.GetKind()+" "+client.ObjectKeyFromObject(o).String()] = live.Object
	}
	return contents
}

// sameAsTheResource checks every object of the manifest after kubectl applied
// it and then the provider did, both with server-side apply:
//   - the object is as it was before the provider's apply (generation
//     included): the resource sets no field to another value and adds none;
//   - every field kubectl applied, the provider applied too: the resource
//     leaves out nothing the manifest sets.
//
// The two field sets need not be equal: a field the API server defaults
// inside an atomic struct or list (env[].valueFrom.fieldRef.apiVersion,
// webhooks[].rules[].scope) makes the forced second apply take the whole
// atomic field from the first manager, although the values are the same.
func sameAsTheResource(t *testing.T, c *testcluster.Cluster, objs []*unstructured.Unstructured, before map[string]map[string]any) {
	t.Helper()
	after := liveContents(t, c, objs)
	for _, o := range objs {
		name := o.GetKind() + " " + client.ObjectKeyFromObject(o).String()
		if !reflect.DeepEqual(after[name], before[name]) {
			b, _ := yaml.Marshal(before[name])
			a, _ := yaml.Marshal(after[name])
			t.Errorf("%s changed when the resource applied its defaults over the manifest:\nbefore:\n%s\nafter:\n%s", name, b, a)
		}
		applied := map[string]map[string]any{}
		for _, mf := range liveObject(t, c, o).GetManagedFields() {
			if mf.Operation == metav1.ManagedFieldsOperationApply && mf.FieldsV1 != nil {
				var fields map[string]any
				if err := json.Unmarshal([]byte(mf.FieldsV1.GetRawString()), &fields); err != nil {
					t.Fatalf("%s: managed fields of %s: %v", name, mf.Manager, err)
				}
				applied[mf.Manager] = fields
			}
		}
		kubectl, byKubectl := applied["kubectl"]
		prov, byProvider := applied[provider.FieldManager]
		if !byKubectl || !byProvider {
			t.Errorf("%s: applied by kubectl %v, by %s %v; want both", name, byKubectl, provider.FieldManager, byProvider)
			continue
		}
		if missing := missingFields(kubectl, prov, ""); len(missing) > 0 {
			t.Errorf("%s: the manifest sets fields the resource does not: %v", name, missing)
		}
	}
	if !t.Failed() {
		t.Logf("%d objects: unchanged by the resource's default apply, which sets every field the manifest sets", len(objs))
	}
}

// missingFields lists the paths of a managed field set (FieldsV1 as JSON)
// that are not in another.
func missingFields(set, in map[string]any, path string) []string {
	var missing []string
	for k, v := range set {
		other, ok := in[k]
		if !ok {
			missing = append(missing, path+k)
			continue
		}
		sub, _ := v.(map[string]any)
		otherSub, _ := other.(map[string]any)
		missing = append(missing, missingFields(sub, otherSub, path+k+" ")...)
	}
	sort.Strings(missing)
	return missing
}
