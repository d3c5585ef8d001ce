package webhook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
)

// jobCreators are the users the fake authorizer lets create Jobs, by
// namespace.
var jobCreators = map[string][]string{"maint": {"bob"}}

// rolloutValidator reads nodes node01 (pool a), node02 (pool a) and node03
// (pool b), and answers SubjectAccessReviews as jobCreators says, recording
// each in reviews.
func rolloutValidator(t *testing.T, reviews *[]authorizationv1.SubjectAccessReview) *RolloutValidator {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = nmv1alpha1.AddToScheme(scheme)
	pool := func(name, p string) *corev1.Node {
		n := readyNode(name)
		n.Labels = map[string]string{"pool": p}
		return n
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(pool("node01", "a"), pool("node02", "a"), pool("node03", "b")).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			sar, ok := obj.(*authorizationv1.SubjectAccessReview)
			if !ok {
				return c.Create(ctx, obj, opts...)
			}
			ra := sar.Spec.ResourceAttributes
			sar.Status.Allowed = slices.Contains(jobCreators[ra.Namespace], sar.Spec.User) && ra.Verb == "create" && ra.Group == "batch" && ra.Resource == "jobs"
			*reviews = append(*reviews, *sar)
			return nil
		}}).Build()
	return &RolloutValidator{Reader: c, Writer: c}
}

// asUser is the context of an admission request sent by user.
func asUser(user string) context.Context {
	return admission.NewContextWithRequest(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UserInfo: authenticationv1.UserInfo{Username: user, UID: "uid-" + user, Groups: []string{"team", "system:authenticated"},
			Extra: map[string]authenticationv1.ExtraValue{"scopes": {"maint"}}},
	}})
}

func selectorRollout(pool string) *nmv1alpha1.NodeMaintenanceRollout {
	return &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "pool-" + pool},
		Spec: nmv1alpha1.NodeMaintenanceRolloutSpec{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": pool}}}}
}

func namesRollout(names ...string) *nmv1alpha1.NodeMaintenanceRollout {
	return &nmv1alpha1.NodeMaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Name: "listed"},
		Spec: nmv1alpha1.NodeMaintenanceRolloutSpec{NodeNames: names}}
}

func withStep(r *nmv1alpha1.NodeMaintenanceRollout, ns string) *nmv1alpha1.NodeMaintenanceRollout {
	r.Spec.Step = &nmv1alpha1.RolloutStep{Namespace: ns, JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "patch", Image: "busybox"}}}}}}}
	return r
}

func TestRolloutValidateCreate(t *testing.T) {
	for _, tt := range []struct {
		name    string
		user    string
		rollout *nmv1alpha1.NodeMaintenanceRollout
		wantErr []string // empty: admitted
	}{
		{"selector matches nodes", "alice", selectorRollout("a"), nil},
		{"listed nodes exist", "alice", namesRollout("node03", "node01"), nil},
		{"selector matches no node", "alice", selectorRollout("c"),
			[]string{`NodeMaintenanceRollout "pool-c": spec.nodeSelector "pool=c" matches no node`, "kubectl get nodes -l 'pool=c'"}},
		{"listed nodes missing", "alice", namesRollout("node01", "node09", "node08"),
			[]string{`spec.nodeNames[1]: node "node09" does not exist`, `spec.nodeNames[2]: node "node08" does not exist`}},
		{"invalid spec", "alice", func() *nmv1alpha1.NodeMaintenanceRollout {
			r := selectorRollout("a")
			r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(0))
			r.Spec.SoakFor = &metav1.Duration{Duration: -time.Minute}
			return r
		}(), []string{"spec.maxUnavailable 0 must be at least 1", "spec.soakFor -1m0s must not be negative"}},
		{"step the user may run", "bob", withStep(selectorRollout("a"), "maint"), nil},
		{"step the user may not run", "alice", withStep(selectorRollout("a"), "maint"),
			[]string{`user "alice" may not create jobs.batch in namespace "maint": a rollout's step runs a Job there on its creator's behalf`, "or drop spec.step"}},
		{"step elsewhere", "bob", withStep(selectorRollout("a"), "other"), []string{`user "bob" may not create jobs.batch in namespace "other"`}},
		{"missing nodes and permission at once", "alice", withStep(namesRollout("node09"), "maint"),
			[]string{`node "node09" does not exist`, `user "alice" may not create jobs.batch`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var reviews []authorizationv1.SubjectAccessReview
			_, err := rolloutValidator(t, &reviews).ValidateCreate(asUser(tt.user), tt.rollout)
			assertRefusal(t, err, tt.wantErr)
			if (tt.rollout.Spec.Step != nil) != (len(reviews) == 1) {
				t.Errorf("%d SubjectAccessReviews for a rollout with step %v, want one exactly when it has a step", len(reviews), tt.rollout.Spec.Step)
			}
		})
	}
}

// The nodes of spec.nodeNames are read from the node cache, live only when
// the cache does not have one (it joined moments ago): a rollout of
// hundreds of nodes costs no round trip per node, and a refusal for a
// missing node rests on the live read.
func TestRolloutNodeNamesFromTheCacheFirst(t *testing.T) {
	var reviews []authorizationv1.SubjectAccessReview
	v := rolloutValidator(t, &reviews)
	cache := fake.NewClientBuilder().WithRuntimeObjects(readyNode("node01"), readyNode("node02")).Build()
	var live []string
	v.Cache, v.Reader = cache, interceptor.NewClient(v.Reader.(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			live = append(live, key.Name)
			return c.Get(ctx, key, obj, opts...)
		}})
	_, err := v.ValidateCreate(asUser("alice"), namesRollout("node01", "node02", "node03"))
	assertRefusal(t, err, nil)
	if !slices.Equal(live, []string{"node03"}) {
		t.Errorf("nodes read live: %q, want only node03, which the cache does not have", live)
	}
	live = nil
	_, err = v.ValidateCreate(asUser("alice"), namesRollout("node02", "node09"))
	assertRefusal(t, err, []string{`spec.nodeNames[1]: node "node09" does not exist`})
	if !slices.Equal(live, []string{"node09"}) {
		t.Errorf("nodes read live: %q, want only node09", live)
	}
}

func assertRefusal(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("admitted, want a refusal with %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("refusal %q lacks %q", err, w)
		}
	}
}

// An empty selector is admitted, with a warning that it takes every node.
func TestRolloutEmptySelectorIsAdmittedWithAWarning(t *testing.T) {
	var reviews []authorizationv1.SubjectAccessReview
	r := selectorRollout("a")
	r.Spec.NodeSelector = &metav1.LabelSelector{}
	warnings, err := rolloutValidator(t, &reviews).ValidateCreate(asUser("alice"), r)
	if err != nil || len(warnings) != 1 || !strings.Contains(warnings[0], "spec.nodeSelector is empty: it selects every node of the cluster") {
		t.Fatalf("got warnings %q, error %v; want one warning about the empty selector", warnings, err)
	}
	if warnings, _ := rolloutValidator(t, &reviews).ValidateCreate(asUser("alice"), selectorRollout("a")); len(warnings) != 0 {
		t.Errorf("warnings for a selector with labels: %q", warnings)
	}
}

// The review asks about the requesting user exactly as the API server
// authenticated them, for the Job the step creates.
func TestRolloutStepReviewAsksForTheRequester(t *testing.T) {
	var reviews []authorizationv1.SubjectAccessReview
	if _, err := rolloutValidator(t, &reviews).ValidateCreate(asUser("bob"), withStep(selectorRollout("a"), "maint")); err != nil {
		t.Fatal(err)
	}
	got := reviews[0].Spec
	want := authorizationv1.SubjectAccessReviewSpec{User: "bob", UID: "uid-bob", Groups: []string{"team", "system:authenticated"},
		Extra:              map[string]authorizationv1.ExtraValue{"scopes": {"maint"}},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "maint", Verb: "create", Group: "batch", Resource: "jobs"}}
	if got.User != want.User || got.UID != want.UID || strings.Join(got.Groups, ",") != strings.Join(want.Groups, ",") ||
		strings.Join(got.Extra["scopes"], ",") != "maint" || *got.ResourceAttributes != *want.ResourceAttributes {
		t.Fatalf("review %+v\nwant %+v", got, want)
	}
}

// Without the request in the context (never from the webhook server) or
// with a review the API server does not answer, a step is refused, saying
// why: admission must not guess.
func TestRolloutStepRefusedWhenThePermissionCannotBeChecked(t *testing.T) {
	var reviews []authorizationv1.SubjectAccessReview
	v := rolloutValidator(t, &reviews)
	_, err := v.ValidateCreate(context.Background(), withStep(selectorRollout("a"), "maint"))
	assertRefusal(t, err, []string{"cannot tell who sent the rollout, to check they may create the Jobs of spec.step"})

	v.Writer = interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			return errors.New("connection refused")
		}})
	_, err = v.ValidateCreate(asUser("bob"), withStep(selectorRollout("a"), "maint"))
	assertRefusal(t, err, []string{`cannot check that user "bob" may create jobs.batch in namespace "maint", as spec.step needs: connection refused`})
}

func TestRolloutValidateUpdate(t *testing.T) {
	base := func() *nmv1alpha1.NodeMaintenanceRollout {
		r := withStep(selectorRollout("a"), "maint")
		r.Finalizers = []string{nmv1alpha1.RolloutFinalizer}
		return r
	}
	for _, tt := range []struct {
		name    string
		user    string
		modify  func(*nmv1alpha1.NodeMaintenanceRollout)
		wantErr []string
	}{
		{"paused", "alice", func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Spec.Paused = true }, nil},
		{"maxUnavailable", "alice", func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Spec.MaxUnavailable = ptr.To(intstr.FromString("50%")) }, nil},
		{"finalizer removed", "operator", func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Finalizers = nil }, nil},
		{"maxUnavailable 0", "alice", func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(0)) },
			[]string{"spec.maxUnavailable 0 must be at least 1"}},
		{"selector", "bob", func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Spec.NodeSelector.MatchLabels["pool"] = "b" },
			[]string{`NodeMaintenanceRollout "pool-a": spec.nodeSelector cannot be changed after creation: create a new rollout`}},
		{"step by a user who may not run it", "alice", func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Spec.Step.Namespace = "other" },
			[]string{"spec.step cannot be changed after creation", `user "alice" may not create jobs.batch in namespace "other"`}},
		{"step by a user who may run it", "bob", func(r *nmv1alpha1.NodeMaintenanceRollout) {
			r.Spec.Step.JobTemplate.Spec.Template.Spec.Containers[0].Image = "alpine"
		},
			[]string{"spec.step cannot be changed after creation"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var reviews []authorizationv1.SubjectAccessReview
			newR := base()
			tt.modify(newR)
			_, err := rolloutValidator(t, &reviews).ValidateUpdate(asUser(tt.user), base(), newR)
			assertRefusal(t, err, tt.wantErr)
			if tt.user == "bob" && err != nil && strings.Contains(err.Error(), "may not create") {
				t.Errorf("a user who may run the step is refused for it: %v", err)
			}
		})
	}
}

// A selector that matches more nodes than one rollout's status can keep rows
// for is refused at creation, with how many fit; a set of the largest
// cluster's size is admitted.
func TestRolloutSelectorTooWideForTheStatus(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	var nodes []runtime.Object
	for i := range 6000 {
		n := readyNode(fmt.Sprintf("ip-10-12-%d-%d.eu-central-1.compute.internal", i/256, i%256))
		n.Labels = map[string]string{"pool": "big"}
		if i < 5000 {
			n.Labels["zone"] = "a"
		}
		nodes = append(nodes, n)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithRuntimeObjects(nodes...).Build()
	v := &RolloutValidator{Reader: c, Cache: c, Writer: c}

	_, err := v.ValidateCreate(asUser("alice"), selectorRollout("big"))
	assertRefusal(t, err, []string{`the set of spec.nodeSelector "pool=big" has 6000 nodes, more than one rollout can keep a status row for`,
		"split the set into rollouts of at most", "topology.kubernetes.io/zone"})

	ro := selectorRollout("big")
	ro.Spec.NodeSelector.MatchLabels["zone"] = "a"
	if _, err := v.ValidateCreate(asUser("alice"), ro); err != nil {
		t.Fatalf("a selector of 5000 nodes was refused: %v", err)
	}
}
