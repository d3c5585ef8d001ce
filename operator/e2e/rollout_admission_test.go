package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1alpha1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1alpha1"
	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testoperator"
)

// rolloutWebhookDenied starts every refusal of the rollout webhook, as the
// API server words it.
const rolloutWebhookDenied = `admission webhook "vnodemaintenancerollout.nodemaintenance.io" denied the request: `

// A user allowed to create rollouts but not Jobs in the step's namespace is
// refused at admission, the message naming the permission missing; granted
// that permission, the same user is admitted. The requests are sent as that
// user (impersonated), who has no other permission: the webhook reads the
// nodes with its own.
func TestRolloutAdmissionChecksTheStepPermissionOfItsCreator(t *testing.T) {
	c := testcluster.Get(t)
	pool := c.NewPool(t)
	pool.AddNode(t, "")
	ns := c.Namespace(t)
	user := testcluster.UniqueName(t, "alice")
	grantCluster(t, c, user, rbacv1.PolicyRule{APIGroups: []string{nmv1alpha1.Group}, Resources: []string{nmv1alpha1.RolloutResource}, Verbs: []string{"create", "get", "update"}})
	asUser := impersonating(t, c, user)

	r := stepRollout(testcluster.UniqueName(t, "nmr"), pool, ns)
	err := createAllowedByRBAC(t, asUser, r.DeepCopy())
	want := rolloutWebhookDenied + `NodeMaintenanceRollout "` + r.Name + `": user "` + user + `" may not create jobs.batch in namespace "` + ns +
		`": a rollout's step runs a Job there on its creator's behalf, so its creator needs that permission; ask for it`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("create as %s without create on jobs in %s: got %v\nwant a refusal containing %q", user, ns, err, want)
	}
	t.Logf("refused: %v", err)
	assertRolloutNotStored(t, c, r.Name)

	grantJobs(t, c, user, ns)
	testcluster.WaitFor(t, 30*time.Second, user+"'s rollout to be admitted once they may create Jobs in "+ns, func(ctx context.Context) (bool, error) {
		err = asUser.Create(ctx, r.DeepCopy())
		// Refused for the permission just granted: RBAC is moments behind.
		return err == nil || !strings.Contains(err.Error(), "may not create jobs.batch"), nil
	})
	if err != nil {
		t.Fatalf("create as %s with create on jobs in %s: %v", user, ns, err)
	}
	t.Cleanup(func() { deleteRollout(t, c, r.Name) })

	// The step cannot change, whoever asks; maxUnavailable can. The
	// controller writes the rollout too (its finalizer): each update is
	// made on a fresh copy, again when it lost that race.
	err = updateRolloutAs(asUser, r.Name, func(ro *nmv1alpha1.NodeMaintenanceRollout) {
		ro.Spec.Step.JobTemplate.Spec.Template.Spec.Containers[0].Image = "other:1"
	})
	if err == nil || !strings.Contains(err.Error(), "spec.step cannot be changed after creation: create a new rollout") {
		t.Errorf("update of spec.step: got %v, want the refusal naming spec.step", err)
	}
	err = updateRolloutAs(asUser, r.Name, func(ro *nmv1alpha1.NodeMaintenanceRollout) {
		ro.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	})
	if err != nil {
		t.Errorf("update of spec.maxUnavailable refused: %v", err)
	}
}

// updateRolloutAs changes the rollout named name through cl, on a fresh
// copy each time a write lost a race with another writer.
func updateRolloutAs(cl client.Client, name string, change func(*nmv1alpha1.NodeMaintenanceRollout)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ro := &nmv1alpha1.NodeMaintenanceRollout{}
		if err := cl.Get(bg(), client.ObjectKey{Name: name}, ro); err != nil {
			return err
		}
		change(ro)
		return cl.Update(bg(), ro)
	})
}

// Bad input is refused at admission, each with an error naming the field,
// and nothing is created: neither the rollout nor a NodeMaintenance of it.
func TestRolloutBadInputIsRefusedNamingTheField(t *testing.T) {
	c := testcluster.Get(t)
	pool := c.NewPool(t)
	node := pool.AddNode(t, "")
	ns := c.Namespace(t)
	minute := &metav1.Duration{Duration: -time.Minute}
	for _, tt := range []struct {
		name   string
		modify func(*nmv1alpha1.NodeMaintenanceRollout)
		want   string
	}{
		{"no node selected", func(r *nmv1alpha1.NodeMaintenanceRollout) {
			r.Spec.NodeSelector.MatchLabels[testcluster.PoolLabel] = "no-such-pool"
		}, `spec.nodeSelector "` + testcluster.PoolLabel + `=no-such-pool" matches no node`},
		{"a listed node missing", func(r *nmv1alpha1.NodeMaintenanceRollout) {
			r.Spec.NodeSelector, r.Spec.NodeNames = nil, []string{node.Name, "no-such-node"}
		}, `spec.nodeNames[1]: node "no-such-node" does not exist`},
		// The CRD's own rule refuses these before the webhook sees them.
		{"both selector and names", func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Spec.NodeNames = []string{node.Name} },
			"set exactly one of nodeSelector and nodeNames"},
		{"neither selector nor names", func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Spec.NodeSelector = nil },
			"set exactly one of nodeSelector and nodeNames"},
		{"maxUnavailable 0", func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(0)) },
			"spec.maxUnavailable 0 must be at least 1"},
		{"maxUnavailable over 100%", func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Spec.MaxUnavailable = ptr.To(intstr.FromString("150%")) },
			`spec.maxUnavailable "150%" must be between 1% and 100% of the set`},
		{"step without containers", func(r *nmv1alpha1.NodeMaintenanceRollout) {
			r.Spec.Step.JobTemplate.Spec.Template.Spec.Containers = nil
		},
			"spec.step.jobTemplate.spec.template.spec.containers is empty"},
		{"negative holdFor", func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Spec.Step, r.Spec.HoldFor = nil, minute },
			"spec.holdFor -1m0s must not be negative"},
		{"negative soakFor", func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Spec.SoakFor = minute },
			"spec.soakFor -1m0s must not be negative"},
		{"negative step timeout", func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Spec.Step.Timeout = minute },
			"spec.step.timeout -1m0s must be positive"},
		{"maxFailures with Halt", func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Spec.MaxFailures = ptr.To[int32](2) },
			"spec.maxFailures 2 has no effect with onFailure Halt"},
		{"zero recoveryTimeout", func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Spec.RecoveryTimeout = &metav1.Duration{} },
			"spec.recoveryTimeout 0s must be positive (default 10m0s): it bounds the wait for the evicted workloads; to not wait for them, set recoveryGate: NodeReady"},
		// The CRD's enum refuses it before the webhook sees it.
		{"unknown recoveryGate", func(r *nmv1alpha1.NodeMaintenanceRollout) { r.Spec.RecoveryGate = "Pods" },
			`spec.recoveryGate: Unsupported value: "Pods"`},
		{"unknown time zone", func(r *nmv1alpha1.NodeMaintenanceRollout) {
			r.Spec.Window = &nmv1alpha1.MaintenanceWindow{Days: []string{"Sat"}, Start: "22:00", End: "04:00", TimeZone: "Europe/Atlantis"}
		}, `spec.window.timeZone "Europe/Atlantis" is not a known IANA time zone`},
		{"a window without days (the CRD's minItems)", func(r *nmv1alpha1.NodeMaintenanceRollout) {
			r.Spec.Window = &nmv1alpha1.MaintenanceWindow{Days: []string{}, Start: "22:00", End: "04:00"}
		}, "spec.window.days"},
		{"an unknown day", func(r *nmv1alpha1.NodeMaintenanceRollout) {
			r.Spec.Window = &nmv1alpha1.MaintenanceWindow{Days: []string{"Sat", "Someday"}, Start: "22:00", End: "4:00"}
		}, `spec.window.days[1] "Someday" is not a day of the week`},
		{"a gate URL that is not http(s)", func(r *nmv1alpha1.NodeMaintenanceRollout) {
			r.Spec.Gates = &nmv1alpha1.RolloutGates{Prometheus: &nmv1alpha1.PrometheusGate{URL: "prometheus:9090", Query: "ALERTS"}}
		}, `spec.gates.prometheus.url "prometheus:9090" is not an http or https URL`},
		{"a gate query that does not parse", func(r *nmv1alpha1.NodeMaintenanceRollout) {
			r.Spec.Gates = &nmv1alpha1.RolloutGates{Prometheus: &nmv1alpha1.PrometheusGate{URL: "http://prometheus:9090", Query: "sum(ALERTS"}}
		}, `spec.gates.prometheus.query "sum(ALERTS" does not parse as PromQL: 1:11: parse error: unclosed left parenthesis`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := stepRollout(testcluster.UniqueName(t, "nmr"), pool, ns)
			tt.modify(r)
			err := c.Client.Create(bg(), r)
			if err == nil {
				t.Cleanup(func() { deleteRollout(t, c, r.Name) })
				t.Fatalf("admitted, want a refusal containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v\nwant a refusal containing %q", err, tt.want)
			}
			t.Logf("refused: %v", err)
			assertRolloutNotStored(t, c, r.Name)
		})
	}
}

// While the webhook is down, an update of a rollout's metadata alone (the
// operator removing its finalizer, a label) is not sent to it and goes
// through: the rollout's match condition lets it pass. An update of the spec
// is sent, and refused, since the webhook fails closed.
func TestRolloutMetadataUpdatesPassWhileTheWebhookIsDown(t *testing.T) {
	c := testcluster.Get(t)
	pool := c.NewPool(t)
	pool.AddNode(t, "")
	const hold = "test.nodemaintenance.io/hold"
	r := stepRollout(testcluster.UniqueName(t, "nmr"), pool, c.Namespace(t))
	r.Finalizers = []string{hold}
	if err := c.Client.Create(bg(), r); err != nil {
		t.Fatalf("create NodeMaintenanceRollout %s: %v", r.Name, err)
	}
	t.Cleanup(func() { deleteRollout(t, c, r.Name) })

	stopOperatorUntilCleanup(t, c)
	// The operator may have written the rollout (its finalizer, its status)
	// before it stopped: the updates start from what it left.
	if err := c.Client.Get(bg(), client.ObjectKeyFromObject(r), r); err != nil {
		t.Fatalf("get NodeMaintenanceRollout %s: %v", r.Name, err)
	}
	spec := r.DeepCopy()
	spec.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	if err := c.Client.Update(bg(), spec); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Errorf("spec update with the webhook down: got %v, want a failure calling the webhook (it fails closed)", err)
	}
	r.Finalizers, r.Labels = nil, map[string]string{"team": "a"}
	if err := c.Client.Update(bg(), r); err != nil {
		t.Fatalf("metadata-only update (finalizer removed, label added) with the webhook down: %v", err)
	}
}

// stopOperatorUntilCleanup stops the package operator, its webhook with it,
// and starts it again when the test ends.
func stopOperatorUntilCleanup(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	operator.Stop()
	t.Cleanup(func() {
		var err error
		if operator, err = testoperator.Start(c, defaultOptions()); err != nil {
			t.Errorf("restart the operator: %v", err)
		}
	})
}

// stepRollout is a paused rollout of pool's nodes whose step runs in ns:
// valid, and it starts no node.
func stepRollout(name string, pool *testcluster.Pool, ns string) *nmv1alpha1.NodeMaintenanceRollout {
	return &nmv1alpha1.NodeMaintenanceRollout{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: nmv1alpha1.NodeMaintenanceRolloutSpec{
			NodeSelector: &metav1.LabelSelector{MatchLabels: pool.Selector()},
			Paused:       true,
			Step: &nmv1alpha1.RolloutStep{Namespace: ns, JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "patch", Image: "busybox:1.37", Command: []string{"true"}}}},
			}}}},
		},
	}
}

// impersonating is a client that sends every request as user, with the
// groups the API server gives every authenticated user.
func impersonating(t *testing.T, c *testcluster.Cluster, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(c.RESTConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	cl, err := client.New(cfg, client.Options{Scheme: testcluster.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// createAllowedByRBAC creates obj with cl once RBAC lets the user create
// it (a binding just made takes moments to apply), and returns what the
// create returned then: nil, or the refusal of admission.
func createAllowedByRBAC(t *testing.T, cl client.Client, obj client.Object) error {
	t.Helper()
	var err error
	testcluster.WaitFor(t, 30*time.Second, "RBAC to let the user create "+obj.GetName(), func(ctx context.Context) (bool, error) {
		err = cl.Create(ctx, obj)
		return err == nil || !strings.Contains(err.Error(), "cannot create resource"), nil
	})
	return err
}

// grantCluster gives user rule on the whole cluster, until the test ends.
func grantCluster(t *testing.T, c *testcluster.Cluster, user string, rule rbacv1.PolicyRule) {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{rule}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	createForTest(t, c, role, binding)
}

// grantJobs lets user create Jobs in ns, until the test ends.
func grantJobs(t *testing.T, c *testcluster.Cluster, user, ns string) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"create"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
	createForTest(t, c, role, binding)
}

// createForTest creates objs and deletes them when the test ends.
func createForTest(t *testing.T, c *testcluster.Cluster, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := c.Client.Create(bg(), obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
		}
		t.Cleanup(func() { _ = c.Client.Delete(bg(), obj) })
	}
}

// assertRolloutNotStored fails when the rollout exists, or any
// NodeMaintenance of it.
func assertRolloutNotStored(t *testing.T, c *testcluster.Cluster, name string) {
	t.Helper()
	if err := c.Client.Get(bg(), client.ObjectKey{Name: name}, &nmv1alpha1.NodeMaintenanceRollout{}); !apierrors.IsNotFound(err) {
		t.Errorf("NodeMaintenanceRollout %s: want not found after the refusal, got %v", name, err)
	}
	children := &nmv1beta1.NodeMaintenanceList{}
	if err := c.Client.List(bg(), children, client.MatchingLabels{nmv1alpha1.RolloutLabel: name}); err != nil {
		t.Fatal(err)
	}
	if len(children.Items) > 0 {
		t.Errorf("%d NodeMaintenances of the refused rollout %s exist", len(children.Items), name)
	}
}
