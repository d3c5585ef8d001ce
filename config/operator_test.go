package config

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/utils/ptr"
)

func TestOperatorObjectsAreCompleteAndConsistent(t *testing.T) {
	objs, err := OperatorObjects(OperatorOptions{Namespace: "nmo", Replicas: 2, MaxUnavailable: "20%", MaxUnavailablePolicy: "Refuse", ExtraArgs: []string{"--lease-duration=30m"}})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range objs {
		gvk := o.GetObjectKind().GroupVersionKind()
		if gvk.Kind == "" || gvk.Version == "" {
			t.Fatalf("%T %s has no apiVersion/kind: server-side apply needs them", o, o.GetName())
		}
		kinds[gvk.Kind]++
		if ns := o.GetNamespace(); ns != "" && ns != "nmo" {
			t.Errorf("%s %s in namespace %q, want nmo", gvk.Kind, o.GetName(), ns)
		}
	}
	for kind, n := range map[string]int{"Namespace": 1, "CustomResourceDefinition": 2, "ServiceAccount": 1, "ClusterRole": 2,
		"ClusterRoleBinding": 1, "Role": 2, "RoleBinding": 2, "Secret": 1, "Service": 2, "Deployment": 1, "ValidatingWebhookConfiguration": 1} {
		if kinds[kind] != n {
			t.Errorf("%d %s objects, want %d", kinds[kind], kind, n)
		}
	}
	if objs[0].GetObjectKind().GroupVersionKind().Kind != "Namespace" || objs[len(objs)-1].GetObjectKind().GroupVersionKind().Kind != "ValidatingWebhookConfiguration" {
		t.Error("the namespace must come first and the webhook configuration last (it must not intercept before the operator exists)")
	}

	var dep *appsv1.Deployment
	var vwc *admissionregistrationv1.ValidatingWebhookConfiguration
	var clusterRole *rbacv1.ClusterRole
	for _, o := range objs {
		switch v := o.(type) {
		case *appsv1.Deployment:
			dep = v
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			vwc = v
		case *rbacv1.ClusterRole:
			if v.Name == OperatorName {
				clusterRole = v
			}
		}
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if *dep.Spec.Replicas != 2 || c.Image != DefaultImage {
		t.Errorf("replicas %d image %s", *dep.Spec.Replicas, c.Image)
	}
	// cert-controller waits for the kubelet to mount its secret as the cert dir.
	vols := dep.Spec.Template.Spec.Volumes
	if len(vols) != 1 || vols[0].Secret == nil || vols[0].Secret.SecretName != WebhookSecretName ||
		len(c.VolumeMounts) != 1 || c.VolumeMounts[0].Name != vols[0].Name || c.VolumeMounts[0].MountPath != certDir {
		t.Errorf("the webhook certificate secret %s is not mounted at %s: volumes %+v, mounts %+v", WebhookSecretName, certDir, vols, c.VolumeMounts)
	}
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"--leader-elect", "--max-unavailable=20%", "--max-unavailable-policy=Refuse", "--lease-duration=30m", "--webhook-secret-name=" + WebhookSecretName} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %s", args, want)
		}
	}
	sc := c.SecurityContext
	if !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("container security context too weak: %+v", sc)
	}
	if c.LivenessProbe == nil || c.ReadinessProbe == nil {
		t.Error("probes missing")
	}
	svc := vwc.Webhooks[0].ClientConfig.Service
	if svc == nil || svc.Namespace != "nmo" || svc.Name != WebhookServiceName || svc.Path == nil {
		t.Errorf("webhook client config %+v", vwc.Webhooks[0].ClientConfig)
	}
	for _, wh := range vwc.Webhooks {
		if len(wh.MatchConditions) != 1 {
			t.Errorf("webhook %s: the match condition that keeps finalizer updates away from the webhook is missing", wh.Name)
		}
	}
	found := false
	for _, r := range clusterRole.Rules {
		for _, res := range r.Resources {
			if res == "pods/eviction" {
				found = true
			}
			if res == "secrets" {
				t.Error("secrets must not be in the ClusterRole: the operator reads only its own namespace's")
			}
		}
	}
	if !found {
		t.Error("the ClusterRole lacks pods/eviction")
	}
}

// `make image` tags what the provider deploys by default.
func TestMakeImageTagsTheDefaultImage(t *testing.T) {
	makefile, err := os.ReadFile("../GNUmakefile")
	if err != nil {
		t.Fatal(err)
	}
	want := "IMAGE ?= " + DefaultImage + "\n"
	if !strings.Contains(string(makefile), want) {
		t.Fatalf("GNUmakefile lacks %q: make image and the provider's default image disagree", strings.TrimSpace(want))
	}
}

// The installation serves metrics over HTTPS to authorized scrapers only: the
// operator may ask the API server who a scraper is and what it may do, and a
// metrics-reader ClusterRole exists to bind scrapers to.
func TestOperatorObjectsServeSecureMetrics(t *testing.T) {
	objs, err := OperatorObjects(OperatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clusterRoles := map[string]*rbacv1.ClusterRole{}
	var args []string
	for _, o := range objs {
		switch v := o.(type) {
		case *rbacv1.ClusterRole:
			clusterRoles[v.Name] = v
		case *appsv1.Deployment:
			args = v.Spec.Template.Spec.Containers[0].Args
		}
	}
	if !slices.Contains(args, "--metrics-secure") {
		t.Errorf("args %v lack --metrics-secure", args)
	}
	operator := clusterRoles[OperatorName]
	for _, want := range []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	} {
		if operator == nil || !slices.ContainsFunc(operator.Rules, func(r rbacv1.PolicyRule) bool { return reflect.DeepEqual(r, want) }) {
			t.Errorf("the operator's ClusterRole lacks %s %v %v: the metrics endpoint cannot check scrapers", want.APIGroups[0], want.Resources, want.Verbs)
		}
	}
	reader := clusterRoles[MetricsReaderName]
	want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
	if reader == nil || !reflect.DeepEqual(reader.Rules, want) {
		t.Errorf("ClusterRole %s: %+v, want rules %+v", MetricsReaderName, reader, want)
	}
}

// The operator runs as 65532:65532: without runAsGroup, kubelet starts the
// image's USER 65532:65532 with group 0.
func TestOperatorRunsAsNonRootUserAndGroup(t *testing.T) {
	objs, err := OperatorObjects(OperatorOptions{Namespace: "ops", Image: "example.com/nmo:v1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		dep, ok := o.(*appsv1.Deployment)
		if !ok {
			continue
		}
		sc := dep.Spec.Template.Spec.Containers[0].SecurityContext
		if sc == nil || ptr.Deref(sc.RunAsUser, 0) != 65532 || ptr.Deref(sc.RunAsGroup, 0) != 65532 || !ptr.Deref(sc.RunAsNonRoot, false) {
			t.Fatalf("security context %+v, want non-root 65532:65532", sc)
		}
		return
	}
	t.Fatal("no Deployment in the installation")
}

// allow_force_drain is the only way the operator gets to delete pods: the
// grant and the flag come together, and neither comes without it.
func TestForceDrainGrantOnlyWhenAllowed(t *testing.T) {
	for _, allow := range []bool{false, true} {
		objs, err := OperatorObjects(OperatorOptions{AllowForceDrain: allow})
		if err != nil {
			t.Fatal(err)
		}
		deletesPods, flag := false, false
		for _, o := range objs {
			switch v := o.(type) {
			case *rbacv1.ClusterRole:
				for _, r := range v.Rules {
					if slices.Contains(r.Resources, "pods") && slices.Contains(r.Verbs, "delete") {
						deletesPods = true
					}
				}
			case *appsv1.Deployment:
				flag = slices.Contains(v.Spec.Template.Spec.Containers[0].Args, "--allow-force-drain")
			}
		}
		if deletesPods != allow || flag != allow {
			t.Errorf("AllowForceDrain=%v: pods delete granted %v, --allow-force-drain %v; want both %v", allow, deletesPods, flag, allow)
		}
	}
}
