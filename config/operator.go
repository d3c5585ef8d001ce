package config

import (
	"bytes"
	"fmt"
	"io"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

const (
	// OperatorName names the operator's Deployment, ServiceAccount, RBAC and
	// webhook configuration.
	OperatorName = "node-maintenance-operator"
	// DefaultNamespace is where the operator is installed unless told otherwise.
	DefaultNamespace = "node-maintenance-operator"
	// ImageRepository and ImageTag are what `make image` builds and tags.
	ImageRepository = "ghcr.io/nodemaintenance/node-maintenance-operator"
	ImageTag        = "v0.1.0"
	// DefaultImage is the image the provider deploys unless told otherwise.
	DefaultImage = ImageRepository + ":" + ImageTag
	// DefaultReplicas is the operator's replica count unless told otherwise.
	DefaultReplicas = 1
	// DefaultCPURequest, DefaultMemoryRequest and DefaultMemoryLimit are
	// DefaultResources, as quantities the provider's schema can show.
	DefaultCPURequest    = "50m"
	DefaultMemoryRequest = "64Mi"
	DefaultMemoryLimit   = "256Mi"

	// WebhookServiceName is the Service in front of the webhook; in-cluster
	// certificates are issued for its DNS name.
	WebhookServiceName = OperatorName + "-webhook"
	// WebhookSecretName is the secret the in-cluster webhook certificates are
	// kept in (and mounted from).
	WebhookSecretName = OperatorName + "-webhook-cert"
	// MetricsReaderName is the ClusterRole a scraper of the operator's metrics
	// is bound to: the endpoint serves authenticated and authorized clients only.
	MetricsReaderName = OperatorName + "-metrics-reader"
	// WebhookPort, MetricsPort and HealthPort are the ports the operator
	// listens on in its pod, and the defaults of its flags.
	WebhookPort = 9443
	MetricsPort = 8080
	HealthPort  = 8081

	metricsServiceName = OperatorName + "-metrics"
	certDir            = "/tmp/k8s-webhook-server/serving-certs"
	// rbacPlaceholderNamespace is what controller-gen writes for namespaced
	// RBAC markers; it becomes the install namespace.
	rbacPlaceholderNamespace = "system"
)

// ForceDrainRule is the grant an installation with AllowForceDrain adds to
// the generated ClusterRole: deleting the pods a timed-out drain left, as
// spec.drain.onTimeout Force asks.
var ForceDrainRule = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete"}}

// OperatorOptions describe one installation of the operator.
type OperatorOptions struct {
	Namespace      string
	Image          string
	Replicas       int32
	Resources      corev1.ResourceRequirements
	MaxUnavailable string
	// MaxUnavailablePolicy is --max-unavailable-policy: Queue (the
	// operator's default when empty) or Refuse.
	MaxUnavailablePolicy string
	// AllowForceDrain grants the operator the deletion of pods and lets it
	// carry out spec.drain.onTimeout Force (--allow-force-drain). Off, the
	// webhook refuses Force and the operator has no right to delete a pod.
	AllowForceDrain bool
	ExtraArgs       []string
	// WebhookURL and WebhookCABundle point the webhook at an operator that
	// runs outside the cluster (development, or a cluster whose API server
	// cannot reach Services). Empty: the in-cluster Service, with
	// certificates issued by the operator.
	WebhookURL      string
	WebhookCABundle []byte
}

// DefaultResources are modest: the operator caches pods and nodes, and idles.
func DefaultResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(DefaultCPURequest), corev1.ResourceMemory: resource.MustParse(DefaultMemoryRequest)},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(DefaultMemoryLimit)},
	}
}

// OperatorObjects renders every object of an installation, in the order to
// apply them (delete in reverse). RBAC, the CRD and the webhook configuration
// come from the generated manifests, so an installation never drifts from the
// markers in the code.
func OperatorObjects(o OperatorOptions) ([]client.Object, error) {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Image == "" {
		o.Image = DefaultImage
	}
	labels := map[string]string{"app.kubernetes.io/name": OperatorName, "app.kubernetes.io/managed-by": "terraform-provider-nodemaintenance"}
	meta := func(name string, namespaced bool) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Name: name, Labels: labels}
		if namespaced {
			m.Namespace = o.Namespace
		}
		return m
	}
	tm := func(apiVersion, kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
	}

	crds, err := CRDs()
	if err != nil {
		return nil, err
	}
	clusterRole, roles, err := generatedRBAC()
	if err != nil {
		return nil, err
	}
	clusterRole.TypeMeta, clusterRole.ObjectMeta = tm("rbac.authorization.k8s.io/v1", "ClusterRole"), meta(OperatorName, false)
	if o.AllowForceDrain {
		clusterRole.Rules = append(clusterRole.Rules, ForceDrainRule)
	}
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: OperatorName, Namespace: o.Namespace}}

	objs := []client.Object{
		&corev1.Namespace{TypeMeta: tm("v1", "Namespace"), ObjectMeta: meta(o.Namespace, false)},
	}
	for _, crd := range crds {
		crd.TypeMeta = tm("apiextensions.k8s.io/v1", "CustomResourceDefinition")
		objs = append(objs, crd)
	}
	objs = append(objs,
		&corev1.ServiceAccount{TypeMeta: tm("v1", "ServiceAccount"), ObjectMeta: meta(OperatorName, true)},
		clusterRole,
		&rbacv1.ClusterRoleBinding{TypeMeta: tm("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"), ObjectMeta: meta(OperatorName, false),
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: OperatorName}, Subjects: subject},
		// Bound by whoever scrapes the metrics (--metrics-secure): the operator
		// asks the API server whether the scraper may get /metrics.
		&rbacv1.ClusterRole{TypeMeta: tm("rbac.authorization.k8s.io/v1", "ClusterRole"), ObjectMeta: meta(MetricsReaderName, false),
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}},
	)
	for i, r := range roles {
		name := OperatorName
		if i > 0 {
			name = fmt.Sprintf("%s-%d", OperatorName, i)
		}
		r.TypeMeta, r.ObjectMeta = tm("rbac.authorization.k8s.io/v1", "Role"), meta(name, true)
		objs = append(objs, r, &rbacv1.RoleBinding{TypeMeta: tm("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: meta(name, true),
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}, Subjects: subject})
	}
	leaderElection := OperatorName + "-leader-election"
	objs = append(objs,
		&rbacv1.Role{TypeMeta: tm("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: meta(leaderElection, true), Rules: []rbacv1.PolicyRule{
			// What client-go's leader election does with its Lease: read it,
			// create it once, renew and release it by update.
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		}},
		&rbacv1.RoleBinding{TypeMeta: tm("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: meta(leaderElection, true),
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: leaderElection}, Subjects: subject},
		// cert-controller fills this secret with the webhook CA and certificate.
		&corev1.Secret{TypeMeta: tm("v1", "Secret"), ObjectMeta: meta(WebhookSecretName, true)},
		&corev1.Service{TypeMeta: tm("v1", "Service"), ObjectMeta: meta(WebhookServiceName, true), Spec: corev1.ServiceSpec{
			Selector: labels, Ports: []corev1.ServicePort{{Name: "webhook", Port: 443, TargetPort: intstr.FromString("webhook")}}}},
		&corev1.Service{TypeMeta: tm("v1", "Service"), ObjectMeta: meta(metricsServiceName, true), Spec: corev1.ServiceSpec{
			Selector: labels, Ports: []corev1.ServicePort{{Name: "metrics", Port: MetricsPort, TargetPort: intstr.FromString("metrics")}}}},
		deployment(o, labels, meta(OperatorName, true)),
	)
	clientConfig := admissionregistrationv1.WebhookClientConfig{
		Service: &admissionregistrationv1.ServiceReference{Namespace: o.Namespace, Name: WebhookServiceName},
	}
	if o.WebhookURL != "" {
		clientConfig = admissionregistrationv1.WebhookClientConfig{URL: &o.WebhookURL, CABundle: o.WebhookCABundle}
	}
	vwc, err := ValidatingWebhookConfiguration(OperatorName, clientConfig)
	if err != nil {
		return nil, err
	}
	vwc.TypeMeta, vwc.Labels = tm("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"), labels
	return append(objs, vwc), nil
}

func deployment(o OperatorOptions, labels map[string]string, m metav1.ObjectMeta) *appsv1.Deployment {
	args := []string{
		"--leader-elect",
		fmt.Sprintf("--metrics-bind-address=:%d", MetricsPort),
		// HTTPS, for scrapers bound to the metrics-reader ClusterRole only.
		"--metrics-secure",
		fmt.Sprintf("--health-probe-bind-address=:%d", HealthPort),
		fmt.Sprintf("--webhook-port=%d", WebhookPort),
		"--webhook-cert-dir=" + certDir,
		"--webhook-config-name=" + OperatorName,
		"--webhook-service-name=" + WebhookServiceName,
		"--webhook-secret-name=" + WebhookSecretName,
	}
	if o.MaxUnavailable != "" {
		args = append(args, "--max-unavailable="+o.MaxUnavailable)
	}
	if o.MaxUnavailablePolicy != "" {
		args = append(args, "--max-unavailable-policy="+o.MaxUnavailablePolicy)
	}
	if o.AllowForceDrain {
		args = append(args, "--allow-force-drain")
	}
	args = append(args, o.ExtraArgs...)
	resources := o.Resources
	if resources.Requests == nil && resources.Limits == nil {
		resources = DefaultResources()
	}
	probe := func(path string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("health")}},
			PeriodSeconds: 10}
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: m,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(o.Replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: OperatorName,
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), FSGroup: ptr.To[int64](65532),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					TerminationGracePeriodSeconds: ptr.To[int64](10),
					Containers: []corev1.Container{{
						Name:  "operator",
						Image: o.Image,
						Args:  args,
						Env: []corev1.EnvVar{{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}},
						Ports: []corev1.ContainerPort{
							{Name: "webhook", ContainerPort: WebhookPort}, {Name: "metrics", ContainerPort: MetricsPort}, {Name: "health", ContainerPort: HealthPort},
						},
						Resources:      resources,
						LivenessProbe:  probe("/healthz"),
						ReadinessProbe: probe("/readyz"),
						SecurityContext: &corev1.SecurityContext{
							RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532),
							AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "certs", MountPath: certDir, ReadOnly: true}},
					}},
					// cert-controller keeps the certificates in the secret and waits
					// for the kubelet to mount them here (group-readable: fsGroup).
					Volumes: []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						SecretName: WebhookSecretName, DefaultMode: ptr.To[int32](0o440)}}}},
				},
			},
		},
	}
}

// generatedRBAC splits the controller-gen RBAC output into the ClusterRole
// and the namespaced Roles (whose placeholder namespace is the install one).
func generatedRBAC() (*rbacv1.ClusterRole, []*rbacv1.Role, error) {
	var clusterRole *rbacv1.ClusterRole
	var roles []*rbacv1.Role
	dec := utilyaml.NewDocumentDecoder(io.NopCloser(bytes.NewReader(RoleYAML)))
	buf := make([]byte, len(RoleYAML)+1)
	for {
		n, err := dec.Read(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read the embedded RBAC: %w", err)
		}
		doc := buf[:n]
		var head metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return nil, nil, err
		}
		switch head.Kind {
		case "ClusterRole":
			clusterRole = &rbacv1.ClusterRole{}
			if err := yaml.UnmarshalStrict(doc, clusterRole); err != nil {
				return nil, nil, err
			}
		case "Role":
			r := &rbacv1.Role{}
			if err := yaml.UnmarshalStrict(doc, r); err != nil {
				return nil, nil, err
			}
			if r.Namespace != rbacPlaceholderNamespace {
				return nil, nil, fmt.Errorf("generated Role %s is for namespace %q, expected the %q placeholder", r.Name, r.Namespace, rbacPlaceholderNamespace)
			}
			roles = append(roles, r)
		}
	}
	if clusterRole == nil {
		return nil, nil, fmt.Errorf("the embedded RBAC has no ClusterRole")
	}
	return clusterRole, roles, nil
}
