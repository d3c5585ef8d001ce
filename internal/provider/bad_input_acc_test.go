package provider_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fwresource "github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nmv1beta1 "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1"
	nmvalidation "github.com/nodemaintenance/terraform-provider-nodemaintenance/api/v1beta1/validation"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/config"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/provider"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
)

// Layers that refuse bad input, outermost first. Terraform cannot reach the
// CRD schema or the webhook with a value the provider already refuses, so
// those cases call the API directly, as kubectl or another tool would.
const (
	layerProvider  = "provider"
	layerWebhook   = "webhook"
	layerCRD       = "CRD schema"
	layerAPIServer = "API server"
)

// badInputCase is one bad input. Exactly one of config (a Terraform
// configuration, run on every CLI) and api (a direct API call) is set; want
// must match the error, and should name the attribute or field and the bad
// value or the limit.
type badInputCase struct {
	name   string
	layer  string
	setup  func(t *testing.T, f *badInputFixture)
	config func(f *badInputFixture) string
	api    func(ctx context.Context, f *badInputFixture) error
	want   *regexp.Regexp
}

// Every bad input is refused with an error that names what is wrong, and
// nothing in the cluster changes: no NodeMaintenance appears, changes or
// goes (watched during the case, and compared with a snapshot after it), the
// nodes involved keep their schedulability, taints and labels, and no
// namespace appears (an operator installation starts with its namespace).
//
// Limits, as the CRD has them: spec.nodeName 1 to 253 characters (and a
// DNS-1123 subdomain, the webhook's rule), spec.reason at most 1024
// characters (nmv1beta1.MaxReasonLength; characters, not bytes).
func TestAccBadInputIsRefusedAndChangesNothing(t *testing.T) {
	c := testcluster.Get(t)
	// Only what a case writes may configure the provider.
	for _, env := range []string{"KUBECONFIG", "KUBE_CONFIG_PATH", "KUBE_CONFIG_PATHS", "KUBE_CTX", "KUBE_HOST", "KUBE_TOKEN", "KUBE_INSECURE"} {
		t.Setenv(env, "")
	}
	creds := newTestCredentials(t, c)

	onNode := func(body string) func(f *badInputFixture) string {
		return func(f *badInputFixture) string {
			return providerBlock(f.c) + fmt.Sprintf("resource \"nodemaintenance\" \"this\" {\n  node_name = %q\n  %s\n}\n", f.node(), body)
		}
	}
	resourceWith := func(body string) func(f *badInputFixture) string {
		return func(f *badInputFixture) string {
			return providerBlock(f.c) + fmt.Sprintf("resource \"nodemaintenance\" \"this\" {\n  %s\n}\n", body)
		}
	}
	operatorWith := func(body string) func(f *badInputFixture) string {
		return func(f *badInputFixture) string {
			return providerBlock(f.c) + fmt.Sprintf("resource \"nodemaintenance_operator\" \"this\" {\n  namespace = %q\n  %s\n}\n", f.unique("nmo-bad"), body)
		}
	}
	// rolloutOn is a rollout of the case's node, rolloutWith one of body alone.
	rolloutWith := func(body string) func(f *badInputFixture) string {
		return func(f *badInputFixture) string {
			return providerBlock(f.c) + fmt.Sprintf("resource \"nodemaintenance_rollout\" \"this\" {\n  name = %q\n  %s\n}\n", f.unique("nmr-bad"), body)
		}
	}
	rolloutOn := func(body string) func(f *badInputFixture) string {
		return func(f *badInputFixture) string {
			return rolloutWith(fmt.Sprintf("node_names = [%q]\n  %s", f.node(), body))(f)
		}
	}
	// listWith reads the cluster through a provider configured by body.
	listWith := func(body func(f *badInputFixture) string) func(f *badInputFixture) string {
		return func(f *badInputFixture) string {
			return fmt.Sprintf("provider \"nodemaintenance\" {\n  %s\n}\n\ndata \"nodemaintenance_list\" \"all\" {}\n", body(f))
		}
	}
	static := func(s string) func(*badInputFixture) string { return func(*badInputFixture) string { return s } }
	withToken := func(token func(f *badInputFixture) string) func(f *badInputFixture) string {
		return func(f *badInputFixture) string {
			return creds.server + fmt.Sprintf("\n  token = %q", token(f))
		}
	}
	withNode := func(t *testing.T, f *badInputFixture) { f.addNode(t) }
	withMaintenance := func(t *testing.T, f *badInputFixture) { f.maintain(t, f.addNode(t), "already in maintenance") }
	long := strings.Repeat

	cases := []badInputCase{
		// The provider refuses at plan time, before anything reaches the cluster.
		{name: "node_name empty", layer: layerProvider, config: resourceWith(`node_name = ""`),
			want: regexp.MustCompile(`(?s)Invalid Node Name.*node_name\s+is\s+empty`)},
		{name: "node_name 254 characters", layer: layerProvider, config: resourceWith(fmt.Sprintf("node_name = %q", long("a", 254))),
			want: regexp.MustCompile(`(?s)Invalid Node Name.*node_name\s+is\s+254\s+characters\s+long.*at\s+most\s+253`)},
		{name: "node_name not DNS-1123", layer: layerProvider, config: resourceWith(`node_name = "Bad_Name"`),
			want: regexp.MustCompile(`(?s)Invalid Node Name.*node_name\s+"Bad_Name"\s+is\s+not\s+a\s+valid\s+node\s+name.*RFC\s+1123`)},
		{name: "name not DNS-1123", layer: layerProvider, setup: withNode, config: onNode(`name = "Maint_1"`),
			want: regexp.MustCompile(`(?s)Invalid NodeMaintenance Name.*name\s+"Maint_1"\s+is\s+not\s+a\s+valid`)},
		{name: "reason 1025 characters", layer: layerProvider, setup: withNode, config: onNode(fmt.Sprintf("reason = %q", long("x", 1025))),
			want: regexp.MustCompile(`(?s)Reason Too Long.*reason\s+is\s+1025\s+characters\s+long.*at\s+most\s+1024`)},
		{name: "reason 1025 Chinese characters", layer: layerProvider, setup: withNode, config: onNode(fmt.Sprintf("reason = %q", long("維", 1025))),
			want: regexp.MustCompile(`(?s)Reason Too Long.*reason\s+is\s+1025\s+characters\s+long.*at\s+most\s+1024`)},
		{name: "create timeout not a duration", layer: layerProvider, setup: withNode, config: onNode("timeouts {\n    create = \"soon\"\n  }"),
			want: regexp.MustCompile(`(?s)Invalid Attribute Value Time Duration.*create\s+=\s+"soon"`)},
		{name: "create timeout negative", layer: layerProvider, setup: withNode, config: onNode("timeouts {\n    create = \"-5m\"\n  }"),
			want: regexp.MustCompile(`(?s)Invalid Timeout.*timeouts\.create\s+is\s+"-5m",\s+which\s+is\s+not\s+a\s+positive\s+duration`)},
		{name: "delete timeout zero", layer: layerProvider, setup: withNode, config: onNode("timeouts {\n    delete = \"0s\"\n  }"),
			want: regexp.MustCompile(`(?s)Invalid Timeout.*timeouts\.delete\s+is\s+"0s"`)},
		{name: "drain timeout not a duration", layer: layerProvider, setup: withNode, config: onNode("drain = {\n    timeout = \"soon\"\n  }"),
			want: regexp.MustCompile(`(?s)Invalid Duration.*"soon"\s+is\s+not\s+a\s+Go\s+duration`)},
		{name: "drain on_timeout without timeout", layer: layerProvider, setup: withNode, config: onNode("drain = {\n    on_timeout = \"Restore\"\n  }"),
			want: regexp.MustCompile(`(?s)Invalid Drain Policy.*drain\.on_timeout\s+Restore\s+needs\s+drain\.timeout`)},
		{name: "drain on_timeout unknown", layer: layerProvider, setup: withNode, config: onNode("drain = {\n    timeout = \"5m\"\n    on_timeout = \"Later\"\n  }"),
			want: regexp.MustCompile(`(?s)on_timeout\s+value\s+must\s+be\s+one\s+of.*"Fail".*got:\s+"Later"`)},
		{name: "drain pod_selector invalid", layer: layerProvider, setup: withNode, config: onNode("drain = {\n    pod_selector = \"app in web\"\n  }"),
			want: regexp.MustCompile(`(?s)Invalid Label Selector.*"app in web"`)},
		{name: "drain grace_period_seconds negative", layer: layerProvider, setup: withNode, config: onNode("drain = {\n    grace_period_seconds = -1\n  }"),
			want: regexp.MustCompile(`(?s)grace_period_seconds\s+value\s+must\s+be\s+at\s+least\s+0`)},
		{name: "list phase unknown", layer: layerProvider, config: func(f *badInputFixture) string {
			return providerBlock(f.c) + "data \"nodemaintenance_list\" \"this\" {\n  phase = \"Done\"\n}\n"
		}, want: regexp.MustCompile(`(?s)phase\s+value\s+must\s+be\s+one\s+of.*"Running".*got:\s+"Done"`)},
		{name: "operator max_unavailable not a count", layer: layerProvider, config: operatorWith(`max_unavailable = "lots"`),
			want: regexp.MustCompile(`(?s)Invalid Max Unavailable.*max_unavailable\s+"lots"\s+is\s+not\s+a\s+number\s+of\s+nodes`)},
		{name: "operator max_unavailable negative", layer: layerProvider, config: operatorWith(`max_unavailable = "-1"`),
			want: regexp.MustCompile(`(?s)Invalid Max Unavailable.*max_unavailable\s+"-1"`)},
		{name: "operator max_unavailable_policy unknown", layer: layerProvider, config: operatorWith(`max_unavailable_policy = "Wait"`),
			want: regexp.MustCompile(`(?s)max_unavailable_policy\s+value\s+must\s+be\s+one\s+of.*"Queue".*"Refuse".*got:\s+"Wait"`)},
		{name: "operator cpu_request not a quantity", layer: layerProvider, config: operatorWith(`cpu_request = "lots"`),
			want: regexp.MustCompile(`(?s)Invalid Quantity.*cpu_request\s+"lots"\s+is\s+not\s+a\s+Kubernetes\s+quantity`)},
		{name: "operator memory_limit negative", layer: layerProvider, config: operatorWith(`memory_limit = "-64Mi"`),
			want: regexp.MustCompile(`(?s)Invalid Quantity.*memory_limit\s+"-64Mi"\s+is\s+negative`)},
		{name: "operator replicas negative", layer: layerProvider, config: operatorWith(`replicas = -1`),
			want: regexp.MustCompile(`(?s)replicas\s+value\s+must\s+be\s+at\s+least\s+0,\s+got:\s+-1`)},
		{name: "operator webhook_url without CA", layer: layerProvider, config: operatorWith(`webhook_url = "https://10.0.0.5:9443"`),
			want: regexp.MustCompile(`(?s)"webhook_ca_bundle"\s+must\s+be\s+specified\s+when\s+"webhook_url"`)},
		{name: "operator namespace not DNS-1123", layer: layerProvider, config: func(f *badInputFixture) string {
			return providerBlock(f.c) + "resource \"nodemaintenance_operator\" \"this\" {\n  namespace = \"Bad_NS\"\n}\n"
		}, want: regexp.MustCompile(`(?s)Invalid Namespace Name.*namespace\s+"Bad_NS"\s+is\s+not\s+a\s+valid\s+namespace\s+name`)},

		// A rollout: its node set, max_unavailable, its step, its durations.
		{name: "rollout selects no node", layer: layerProvider, setup: withNode, config: rolloutWith(`node_selector = "nodemaintenance.test/pool=nothing-here"`),
			want: regexp.MustCompile(`(?s)No Node Matches the Selector.*node_selector\s+"nodemaintenance.test/pool=nothing-here"\s+selects\s+no\s+node`)},
		{name: "rollout names a missing node", layer: layerProvider, config: rolloutWith(`node_names = ["no-such-node"]`),
			want: regexp.MustCompile(`(?s)Node Not Found.*no-such-node`)},
		{name: "rollout both node_selector and node_names", layer: layerProvider, setup: withNode, config: rolloutOn(`node_selector = "pool=blue"`),
			want: regexp.MustCompile(`(?s)Invalid Attribute Combination.*node_names`)},
		{name: "rollout neither node_selector nor node_names", layer: layerProvider, config: rolloutWith(""),
			want: regexp.MustCompile(`(?s)Invalid Attribute Combination.*node_names`)},
		{name: "rollout max_unavailable 0", layer: layerProvider, setup: withNode, config: rolloutOn(`max_unavailable = "0"`),
			want: regexp.MustCompile(`(?s)Invalid Rollout.*max_unavailable\s+0\s+must\s+be\s+at\s+least\s+1`)},
		{name: "rollout max_unavailable over 100%", layer: layerProvider, setup: withNode, config: rolloutOn(`max_unavailable = "150%"`),
			want: regexp.MustCompile(`(?s)Invalid Rollout.*max_unavailable\s+"150%"\s+must\s+be\s+between\s+1%\s+and\s+100%`)},
		{name: "rollout step without containers", layer: layerProvider, setup: withNode, config: rolloutOn(
			"step = {\n    namespace = \"default\"\n    job_template = yamlencode({ spec = { template = { spec = { restartPolicy = \"Never\" } } } })\n  }"),
			want: regexp.MustCompile(`(?s)Invalid Rollout.*step\.job_template\.spec\.template\.spec\.containers\s+is\s+empty`)},
		{name: "rollout step job_template misspelt", layer: layerProvider, setup: withNode, config: rolloutOn(
			"step = {\n    namespace = \"default\"\n    job_template = \"spec:\\n  templat: {}\\n\"\n  }"),
			want: regexp.MustCompile(`(?s)Invalid Step Job Template.*unknown\s+field\s+"templat"`)},
		{name: "rollout soak_for negative", layer: layerProvider, setup: withNode, config: rolloutOn(`soak_for = "-5m"`),
			want: regexp.MustCompile(`(?s)Invalid Duration.*soak_for\s+"-5m"\s+is\s+negative`)},

		// Credentials and cluster access: the provider's Configure and its
		// first API call.
		{name: "kubeconfig missing", layer: layerProvider, config: listWith(func(f *badInputFixture) string {
			return fmt.Sprintf("config_path = %q", filepath.Join(f.dir, "nope.yaml"))
		}), want: regexp.MustCompile(`(?s)Kubeconfig File Not Found.*config_path.*nope\.yaml.*does\s+not\s+exist`)},
		{name: "kubeconfig garbage", layer: layerProvider, config: listWith(func(f *badInputFixture) string {
			return fmt.Sprintf("config_path = %q", f.file("garbage.yaml", "clusters: [ {{ not yaml ::\n"))
		}), want: regexp.MustCompile(`(?s)Invalid Kubeconfig File.*garbage\.yaml.*config_path\s+is\s+not\s+a\s+valid\s+kubeconfig`)},
		{name: "kubeconfig unknown context", layer: layerProvider, config: listWith(func(f *badInputFixture) string {
			return fmt.Sprintf("config_path = %q\n  config_context = \"nowhere\"", f.c.KubeconfigPath)
		}), want: regexp.MustCompile(`(?s)Unknown Kubeconfig Context.*config_context\s+is\s+"nowhere".*no\s+context\s+with\s+that\s+name`)},
		{name: "unreachable host", layer: layerProvider, config: listWith(static("host = \"https://127.0.0.1:1\"\n  insecure = true\n  token = \"abc123\"")),
			want: regexp.MustCompile(`(?s)Cannot Reach the Kubernetes Cluster.*https://127\.0\.0\.1:1.*connection\s+refused`)},
		{name: "wrong CA", layer: layerProvider, config: listWith(static(creds.wrongCA + "\n  token = \"abc123\"")),
			want: regexp.MustCompile(`(?s)Cannot Verify the API Server's Certificate.*not\s+trusted.*unknown\s+authority.*cluster_ca_certificate`)},
		{name: "wrong token", layer: layerProvider, config: listWith(withToken(func(*badInputFixture) string { return "not-a-token-the-cluster-knows" })),
			want: regexp.MustCompile(`(?s)Kubernetes Refused the Credentials.*did\s+not\s+accept\s+the\s+provider's\s+credentials.*Check\s+token`)},
		{name: "revoked token", layer: layerProvider, setup: func(t *testing.T, f *badInputFixture) { f.token = creds.revokedToken(t) },
			config: listWith(withToken(func(f *badInputFixture) string { return f.token })),
			want:   regexp.MustCompile(`(?s)Kubernetes Refused the Credentials.*did\s+not\s+accept\s+the\s+provider's\s+credentials`)},
		{name: "exec plugin fails", layer: layerProvider, config: listWith(func(f *badInputFixture) string {
			script := f.file("corp-credentials.sh", "#!/bin/sh\necho 'corp-login: your session expired, run corp-login again' >&2\nexit 1\n")
			if err := os.Chmod(script, 0o755); err != nil {
				f.t.Fatal(err)
			}
			return creds.server + fmt.Sprintf("\n  exec {\n    api_version = \"client.authentication.k8s.io/v1\"\n    command = %q\n  }", script)
		}), want: regexp.MustCompile(`(?s)Kubernetes Credential Plugin Failed.*corp-credentials\.sh.*exit\s+code\s+1.*corp-login:\s+your\s+session\s+expired`)},
		{name: "exec api_version unknown", layer: layerProvider, config: listWith(static(creds.server +
			"\n  exec {\n    api_version = \"client.authentication.k8s.io/v2\"\n    command = \"true\"\n  }")),
			want: regexp.MustCompile(`(?s)Unsupported Exec API Version.*"client\.authentication\.k8s\.io/v2"`)},
		{name: "token and exec", layer: layerProvider, config: listWith(static(creds.server +
			"\n  token = \"abc123\"\n  exec {\n    api_version = \"client.authentication.k8s.io/v1\"\n    command = \"true\"\n  }")),
			want: regexp.MustCompile(`(?s)Conflicting Authentication Methods.*token.*exec\s+block\s+are\s+set`)},

		// The webhook refuses what only the cluster can know; Terraform shows its words.
		{name: "unknown node", layer: layerWebhook, config: func(f *badInputFixture) string {
			return providerBlock(f.c) + fmt.Sprintf("resource \"nodemaintenance\" \"this\" {\n  node_name = %q\n}\n", f.unique("absent"))
		}, want: regexp.MustCompile(`(?s)Cannot Create NodeMaintenance.*node\s+"absent-[0-9a-f]+-\d+"\s+does\s+not\s+exist`)},
		{name: "node already in maintenance", layer: layerWebhook, setup: withMaintenance, config: func(f *badInputFixture) string {
			return providerBlock(f.c) + fmt.Sprintf("resource \"nodemaintenance\" \"this\" {\n  name = %q\n  node_name = %q\n}\n", "second-"+f.node(), f.node())
		}, want: regexp.MustCompile(`(?s)node\s+"node-[0-9a-f]+-\d+"\s+is\s+already\s+in\s+maintenance\s+by\s+NodeMaintenance\s+"maintain-node-`)},
		{name: "drain on_timeout Force not allowed", layer: layerWebhook, setup: withNode, config: onNode("drain = {\n    timeout = \"5m\"\n    on_timeout = \"Force\"\n  }"),
			want: regexp.MustCompile(`(?s)Cannot Create NodeMaintenance.*Force.*allow_force_drain\s+=\s+true`)},
		{name: "control-plane node", layer: layerWebhook, setup: func(t *testing.T, f *badInputFixture) {
			node := &corev1.Node{}
			if err := f.c.Client.Get(context.Background(), client.ObjectKey{Name: f.addNode(t)}, node); err != nil {
				t.Fatal(err)
			}
			orig := node.DeepCopy()
			node.Labels[nmvalidation.ControlPlaneLabel] = ""
			if err := f.c.Client.Patch(context.Background(), node, client.MergeFrom(orig)); err != nil {
				t.Fatalf("label node %s as a control-plane node: %v", node.Name, err)
			}
		}, config: onNode(""),
			want: regexp.MustCompile(`(?s)Cannot Create NodeMaintenance.*is\s+a\s+control-plane\s+node.*unless\s+drain.allow_control_plane_node\s+is\s+true`)},
		{name: "name already taken", layer: layerAPIServer, setup: withMaintenance, config: onNode(""),
			want: regexp.MustCompile(`(?s)Cannot Create NodeMaintenance.*"maintain-node-[0-9a-f]+-\d+"\s+already\s+exists.*import\s+it`)},

		// Direct API calls: what kubectl would send.
		{name: "spec.nodeName empty", layer: layerCRD, api: func(ctx context.Context, f *badInputFixture) error {
			return f.create(ctx, "", "")
		}, want: regexp.MustCompile(`spec\.nodeName\b.*at least 1 chars long`)},
		{name: "spec.nodeName 254 characters", layer: layerCRD, api: func(ctx context.Context, f *badInputFixture) error {
			return f.create(ctx, long("a", 254), "")
		}, want: regexp.MustCompile(`spec\.nodeName: Too long: may not be more than 253\b`)},
		{name: "spec.reason 1025 characters", layer: layerCRD, setup: withNode, api: func(ctx context.Context, f *badInputFixture) error {
			return f.create(ctx, f.node(), long("維", 1025))
		}, want: regexp.MustCompile(`spec\.reason: Too long: may not be more than 1024\b`)},
		{name: "spec.nodeName not DNS-1123", layer: layerWebhook, api: func(ctx context.Context, f *badInputFixture) error {
			return f.create(ctx, "Bad_Name", "")
		}, want: regexp.MustCompile(`spec\.nodeName "Bad_Name" is not a valid node name`)},
		{name: "spec.nodeName update", layer: layerWebhook, setup: func(t *testing.T, f *badInputFixture) {
			f.maintain(t, f.addNode(t), "already in maintenance")
			f.addNode(t)
		}, api: func(ctx context.Context, f *badInputFixture) error {
			return f.update(ctx, func(nm *nmv1beta1.NodeMaintenance) { nm.Spec.NodeName = f.nodes[1] })
		}, want: regexp.MustCompile(`updating spec\.NodeName isn't allowed`)},
		{name: "spec.drain update", layer: layerWebhook, setup: func(t *testing.T, f *badInputFixture) {
			f.maintain(t, f.addNode(t), "already in maintenance")
		}, api: func(ctx context.Context, f *badInputFixture) error {
			return f.update(ctx, func(nm *nmv1beta1.NodeMaintenance) {
				nm.Spec.Drain = &nmv1beta1.DrainPolicy{Timeout: &metav1.Duration{Duration: time.Minute}}
			})
		}, want: regexp.MustCompile(`spec\.drain cannot be changed after creation`)},
		{name: "spec.drain.onTimeout unknown", layer: layerCRD, setup: func(t *testing.T, f *badInputFixture) {
			f.maintain(t, f.addNode(t), "already in maintenance")
		}, api: func(ctx context.Context, f *badInputFixture) error {
			return f.update(ctx, func(nm *nmv1beta1.NodeMaintenance) {
				nm.Spec.Drain = &nmv1beta1.DrainPolicy{Timeout: &metav1.Duration{Duration: time.Minute}, OnTimeout: "Later"}
			})
		}, want: regexp.MustCompile(`spec\.drain\.onTimeout: Unsupported value: "Later"`)},
		// The CRD counts characters, as the provider does, though the API
		// server's message says bytes: the maintenance starts with 1024
		// characters of three bytes each.
		{name: "spec.reason update 1025 characters", layer: layerCRD, setup: func(t *testing.T, f *badInputFixture) {
			f.maintain(t, f.addNode(t), long("維", nmv1beta1.MaxReasonLength))
		}, api: func(ctx context.Context, f *badInputFixture) error {
			return f.update(ctx, func(nm *nmv1beta1.NodeMaintenance) { nm.Spec.Reason = long("x", 1025) })
		}, want: regexp.MustCompile(`spec\.reason: Too long: may not be more than 1024\b`)},
	}

	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.layer+"/"+tc.name, " ", "_"), func(t *testing.T) {
			if tc.api != nil {
				refusedAndUnchanged(t, c, tc)
				return
			}
			eachCLI(t, func(t *testing.T, c *testcluster.Cluster) { refusedAndUnchanged(t, c, tc) })
		})
	}
}

// refusedAndUnchanged runs one case and checks that it was refused with the
// expected words and that the cluster is as it was.
func refusedAndUnchanged(t *testing.T, c *testcluster.Cluster, tc badInputCase) {
	f := &badInputFixture{t: t, c: c, dir: t.TempDir()}
	if tc.setup != nil {
		tc.setup(t, f)
	}
	before := takeSnapshot(t, c, f.nodes)
	changes := watchForChanges(t, c, before)
	// A cleanup, so that it also runs when resource.Test stops the test
	// with t.Fatal; it runs before the cleanups of the setup.
	t.Cleanup(func() { unchanged(t, c, f, before, changes()) })

	if tc.api != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := tc.api(ctx, f)
		switch {
		case err == nil:
			t.Errorf("the %s accepted the bad input", tc.layer)
		case !tc.want.MatchString(err.Error()):
			t.Errorf("error does not match %s:\n%v", tc.want, err)
		default:
			t.Logf("refused: %v", err)
		}
	} else {
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: providerFactories,
			Steps:                    []resource.TestStep{{Config: tc.config(f), ExpectError: tc.want}},
		})
	}
}

// unchanged fails the test when anything the case must not touch changed.
func unchanged(t *testing.T, c *testcluster.Cluster, f *badInputFixture, before clusterSnapshot, changes []string) {
	for _, change := range changes {
		t.Errorf("the cluster changed: %s", change)
	}
	after := takeSnapshot(t, c, f.nodes)
	if !reflect.DeepEqual(before.maintenances, after.maintenances) {
		t.Errorf("NodeMaintenances (name: resourceVersion) changed:\nbefore %v\nafter  %v", before.maintenances, after.maintenances)
	}
	if !reflect.DeepEqual(before.nodes, after.nodes) {
		t.Errorf("nodes changed:\nbefore %+v\nafter  %+v", before.nodes, after.nodes)
	}
	for ns := range after.namespaces {
		if !before.namespaces[ns] {
			t.Errorf("namespace %s appeared", ns)
		}
	}
}

// badInputFixture is what a case's setup prepared.
type badInputFixture struct {
	t     *testing.T
	c     *testcluster.Cluster
	dir   string
	pool  *testcluster.Pool
	nodes []string // fake nodes made for the case; their state is compared
	// existing is a NodeMaintenance made for the case, through the API.
	existing string
	token    string
}

// addNode adds a fresh fake node to the case.
func (f *badInputFixture) addNode(t *testing.T) string {
	if f.pool == nil {
		f.pool = f.c.NewPool(t)
	}
	name := f.pool.AddNode(t, "").Name
	// The node lifecycle controller copies the os and arch labels to their
	// beta.kubernetes.io names a moment after the node appears: let it, so
	// the snapshot is of a node that has settled.
	testcluster.WaitFor(t, time.Minute, "node "+name+" labelled by the node lifecycle controller", func(ctx context.Context) (bool, error) {
		node := &corev1.Node{}
		err := f.c.Client.Get(ctx, client.ObjectKey{Name: name}, node)
		return err == nil && node.Labels[corev1.LabelOSStable] == node.Labels["beta.kubernetes.io/os"] &&
			node.Labels[corev1.LabelArchStable] == node.Labels["beta.kubernetes.io/arch"], err
	})
	f.nodes = append(f.nodes, name)
	return name
}

// node is the case's first node.
func (f *badInputFixture) node() string {
	if len(f.nodes) == 0 {
		f.t.Fatal("the case has no node: give it a setup that adds one")
	}
	return f.nodes[0]
}

func (f *badInputFixture) unique(prefix string) string { return testcluster.UniqueName(f.t, prefix) }

func (f *badInputFixture) file(name, content string) string {
	p := filepath.Join(f.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// maintain puts node into maintenance through the API, as another tool
// would, and waits until the operator has finished; cleanup ends it.
func (f *badInputFixture) maintain(t *testing.T, node, reason string) {
	nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metaName("maintain-" + node), Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node, Reason: reason}}
	if err := f.c.Client.Create(context.Background(), nm); err != nil {
		t.Fatalf("create %s: %v", nm.Name, err)
	}
	f.existing = nm.Name
	t.Cleanup(func() {
		_ = f.c.Client.Delete(context.Background(), nm)
		testcluster.WaitFor(t, 2*time.Minute, nm.Name+" gone", func(ctx context.Context) (bool, error) {
			err := f.c.Client.Get(ctx, client.ObjectKeyFromObject(nm), &nmv1beta1.NodeMaintenance{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
	})
	testcluster.WaitFor(t, 2*time.Minute, nm.Name+" Succeeded", func(ctx context.Context) (bool, error) {
		err := f.c.Client.Get(ctx, client.ObjectKeyFromObject(nm), nm)
		return err == nil && nm.Status.Phase == nmv1beta1.MaintenanceSucceeded, err
	})
}

// create sends a new NodeMaintenance to the API server.
func (f *badInputFixture) create(ctx context.Context, node, reason string) error {
	nm := &nmv1beta1.NodeMaintenance{ObjectMeta: metaName(f.unique("bad")), Spec: nmv1beta1.NodeMaintenanceSpec{NodeName: node, Reason: reason}}
	err := f.c.Client.Create(ctx, nm)
	if err == nil {
		// Refused is the expected outcome; an accepted one must not outlive the case.
		f.t.Cleanup(func() { _ = f.c.Client.Delete(context.Background(), nm) })
	}
	return err
}

// update changes the case's existing NodeMaintenance.
func (f *badInputFixture) update(ctx context.Context, change func(*nmv1beta1.NodeMaintenance)) error {
	nm := &nmv1beta1.NodeMaintenance{}
	if err := f.c.Client.Get(ctx, client.ObjectKey{Name: f.existing}, nm); err != nil {
		f.t.Fatalf("get %s: %v", f.existing, err)
	}
	change(nm)
	return f.c.Client.Update(ctx, nm)
}

// clusterSnapshot is what bad input must not change.
type clusterSnapshot struct {
	maintenances map[string]string // name: resourceVersion
	nodes        map[string]nodeState
	namespaces   map[string]bool
	// The lists' resourceVersions, where the watches start.
	maintenancesRV, nodesRV, namespacesRV string
}

// nodeState is what a maintenance changes on a node.
type nodeState struct {
	Unschedulable bool
	Taints        []string
	Labels        map[string]string
}

func stateOf(n *corev1.Node) nodeState {
	s := nodeState{Unschedulable: n.Spec.Unschedulable, Labels: n.Labels, Taints: []string{}}
	for _, taint := range n.Spec.Taints {
		// The node lifecycle controller's health taints come and go with
		// kwok's heartbeats on a loaded machine; no maintenance sets them.
		if taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable {
			continue
		}
		s.Taints = append(s.Taints, taint.ToString())
	}
	sort.Strings(s.Taints)
	return s
}

func takeSnapshot(t *testing.T, c *testcluster.Cluster, nodes []string) clusterSnapshot {
	t.Helper()
	ctx := context.Background()
	s := clusterSnapshot{maintenances: map[string]string{}, nodes: map[string]nodeState{}, namespaces: map[string]bool{}}
	nms := &nmv1beta1.NodeMaintenanceList{}
	if err := c.Client.List(ctx, nms); err != nil {
		t.Fatal(err)
	}
	for _, nm := range nms.Items {
		s.maintenances[nm.Name] = nm.ResourceVersion
	}
	s.maintenancesRV = nms.ResourceVersion
	nodeList, err := c.Clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.nodesRV = nodeList.ResourceVersion
	involved := map[string]bool{}
	for _, n := range nodes {
		involved[n] = true
	}
	for i := range nodeList.Items {
		if n := &nodeList.Items[i]; involved[n.Name] {
			s.nodes[n.Name] = stateOf(n)
		}
	}
	nsList, err := c.Clientset.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.namespacesRV = nsList.ResourceVersion
	for _, ns := range nsList.Items {
		s.namespaces[ns.Name] = true
	}
	return s
}

// watchForChanges records every change to a NodeMaintenance, to the state
// of the snapshot's nodes and every new namespace from the snapshot on, so
// that a change undone before the case ends (a NodeMaintenance created and
// destroyed again) is caught too. The returned function stops watching and
// lists what changed.
func watchForChanges(t *testing.T, c *testcluster.Cluster, s clusterSnapshot) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	watcher, err := watchClient(c)
	if err != nil {
		t.Fatal(err)
	}
	nmWatch, err := watcher.Watch(ctx, &nmv1beta1.NodeMaintenanceList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: s.maintenancesRV}})
	if err != nil {
		t.Fatal(err)
	}
	nodeWatch, err := c.Clientset.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: s.nodesRV})
	if err != nil {
		t.Fatal(err)
	}
	nsWatch, err := c.Clientset.CoreV1().Namespaces().Watch(ctx, metav1.ListOptions{ResourceVersion: s.namespacesRV})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var changes []string
	var stopping atomic.Bool
	record := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		changes = append(changes, fmt.Sprintf(format, args...))
	}
	var wg sync.WaitGroup
	follow := func(w watch.Interface, onEvent func(watch.Event)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range w.ResultChan() {
				switch ev.Type {
				case watch.Bookmark:
				case watch.Error:
					// Stopping a watch ends its stream with an error event.
					if !stopping.Load() {
						record("watch failed: %v", apierrors.FromObject(ev.Object))
					}
				default:
					onEvent(ev)
				}
			}
		}()
	}
	follow(nmWatch, func(ev watch.Event) {
		if nm, ok := ev.Object.(*nmv1beta1.NodeMaintenance); ok {
			record("NodeMaintenance %s %s (spec %+v)", nm.Name, strings.ToLower(string(ev.Type)), nm.Spec)
		}
	})
	follow(nodeWatch, func(ev watch.Event) {
		n, ok := ev.Object.(*corev1.Node)
		if !ok {
			return
		}
		if want, involved := s.nodes[n.Name]; involved {
			if got := stateOf(n); ev.Type == watch.Deleted || !reflect.DeepEqual(got, want) {
				record("node %s %s: %+v, was %+v", n.Name, strings.ToLower(string(ev.Type)), got, want)
			}
		}
	})
	follow(nsWatch, func(ev watch.Event) {
		if ns, ok := ev.Object.(*corev1.Namespace); ok && ev.Type == watch.Added && !s.namespaces[ns.Name] {
			record("namespace %s created", ns.Name)
		}
	})

	var once sync.Once
	stop := func() []string {
		once.Do(func() {
			// Events of the case's last moments may still be on their way.
			// Whatever they bring that lasts, the snapshot after the case
			// catches; the watch is there for changes undone before the end.
			time.Sleep(200 * time.Millisecond)
			stopping.Store(true)
			cancel()
			nmWatch.Stop()
			nodeWatch.Stop()
			nsWatch.Stop()
			wg.Wait()
		})
		mu.Lock()
		defer mu.Unlock()
		return changes
	}
	t.Cleanup(func() { stop() })
	return stop
}

var (
	watchClientOnce sync.Once
	watchClientOf   client.WithWatch
	watchClientErr  error
)

// watchClient is one watching client of the package cluster for the test binary.
func watchClient(c *testcluster.Cluster) (client.WithWatch, error) {
	watchClientOnce.Do(func() {
		watchClientOf, watchClientErr = client.NewWithWatch(c.RESTConfig, client.Options{Scheme: testcluster.Scheme})
	})
	return watchClientOf, watchClientErr
}

// testCredentials are provider settings for the package cluster's API
// server, as HCL attribute lines.
type testCredentials struct {
	c *testcluster.Cluster
	// server is host plus the cluster's CA (or insecure when it has none).
	server string
	// wrongCA is host plus a CA that did not sign the API server's certificate.
	wrongCA string
	caPEM   []byte
}

func newTestCredentials(t *testing.T, c *testcluster.Cluster) *testCredentials {
	cfg := c.RESTConfig
	caPEM := cfg.CAData
	if len(caPEM) == 0 && cfg.CAFile != "" {
		var err error
		if caPEM, err = os.ReadFile(cfg.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	creds := &testCredentials{c: c, caPEM: caPEM}
	if len(caPEM) > 0 {
		creds.server = fmt.Sprintf("host = %q\n  cluster_ca_certificate = %q", cfg.Host, caPEM)
	} else {
		creds.server = fmt.Sprintf("host = %q\n  insecure = true", cfg.Host)
	}
	creds.wrongCA = fmt.Sprintf("host = %q\n  cluster_ca_certificate = %q", cfg.Host, selfSignedCA(t))
	return creds
}

// selfSignedCA is a CA certificate made up for the test: it signed nothing.
func selfSignedCA(t *testing.T) []byte {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "not the cluster's CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// revokedToken is a real ServiceAccount token whose ServiceAccount was
// deleted: well-formed and signed by the cluster, and refused with 401.
func (creds *testCredentials) revokedToken(t *testing.T) string {
	ctx := context.Background()
	ns := creds.c.Namespace(t)
	sa, err := creds.c.Clientset.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metaName("revoked")}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := creds.c.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := creds.c.Clientset.CoreV1().ServiceAccounts(ns).Delete(ctx, sa.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: creds.c.RESTConfig.Host, BearerToken: tr.Status.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: creds.caPEM, Insecure: len(creds.caPEM) == 0}}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testcluster.WaitFor(t, time.Minute, "the deleted ServiceAccount's token to be refused", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1})
		return apierrors.IsUnauthorized(err), nil
	})
	return tr.Status.Token
}

// The provider's plan-time checks use the CRD's limits: node names are
// checked by api/v1beta1/validation (the webhook's rule, so the two cannot
// disagree), whose MaxNameLength is the CRD's spec.nodeName maxLength, and the
// reason is bounded in characters by nmv1beta1.MaxReasonLength, the CRD's
// spec.reason maxLength.
func TestProviderValidationMatchesTheCRD(t *testing.T) {
	crd, err := config.CRD()
	if err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	nodeName, reason := spec.Properties["nodeName"], spec.Properties["reason"]
	if ptr.Deref(nodeName.MinLength, 0) != 1 || ptr.Deref(nodeName.MaxLength, 0) != int64(nmvalidation.MaxNameLength) {
		t.Errorf("CRD spec.nodeName length is %v..%v; the provider checks 1..%d", nodeName.MinLength, nodeName.MaxLength, nmvalidation.MaxNameLength)
	}
	if ptr.Deref(reason.MaxLength, 0) != nmv1beta1.MaxReasonLength {
		t.Errorf("CRD spec.reason maxLength is %v; the provider checks %d", reason.MaxLength, nmv1beta1.MaxReasonLength)
	}

	ctx := context.Background()
	nmSchema := resourceSchema(t, provider.NewNodeMaintenanceResource())
	refuses := func(attr schema.Attribute, value string) bool {
		var diags []string
		for _, v := range attr.(schema.StringAttribute).Validators {
			resp := &validator.StringResponse{}
			v.ValidateString(ctx, validator.StringRequest{ConfigValue: types.StringValue(value)}, resp)
			if resp.Diagnostics.HasError() {
				diags = append(diags, fmt.Sprint(resp.Diagnostics))
			}
		}
		return len(diags) > 0
	}
	for _, n := range []int{0, 1, nmv1beta1.MaxReasonLength, nmv1beta1.MaxReasonLength + 1} {
		for _, char := range []string{"x", "維"} {
			if got, want := refuses(nmSchema.Attributes["reason"], strings.Repeat(char, n)), n > nmv1beta1.MaxReasonLength; got != want {
				t.Errorf("reason of %d %q: provider refuses %v, want %v", n, char, got, want)
			}
		}
	}
}

func resourceSchema(t *testing.T, r interface {
	Schema(context.Context, fwresource.SchemaRequest, *fwresource.SchemaResponse)
}) schema.Schema {
	resp := &fwresource.SchemaResponse{}
	r.Schema(context.Background(), fwresource.SchemaRequest{}, resp)
	if resp.Diagnostics.HasError() {
		t.Fatal(resp.Diagnostics)
	}
	return resp.Schema
}
