// Package testcluster runs a real Kubernetes control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler) with fake kwok nodes
// for integration and acceptance tests, using the binaries `make tools` built.
// One cluster serves one test package: start it from TestMain with Main.
package testcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/operator/manager"
)

// Components are the processes kwokctl runs for a cluster, in the names
// `kwokctl logs` knows them by.
var Components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller"}

// Scheme knows the built-in types, CRDs and NodeMaintenance: the operator's.
var Scheme = manager.Scheme

// Cluster is a running kwokctl cluster.
type Cluster struct {
	// Name is the kwokctl cluster name.
	Name string
	// KubeconfigPath is a kubeconfig file with admin credentials.
	KubeconfigPath string
	// RESTConfig is the admin rest.Config of the cluster.
	RESTConfig *rest.Config
	// Client is a controller-runtime client (no cache) that knows Scheme.
	Client client.Client
	// Clientset is a client-go clientset.
	Clientset kubernetes.Interface
	// RealNodes are the kubelet-run nodes (Options.RealNodes), named
	// real01, real02, ...
	RealNodes []*RealNode

	workDir  string
	stopOnce sync.Once
}

// Options tune a cluster.
type Options struct {
	// InstallCRD installs the committed NodeMaintenance CRD once the cluster is up.
	InstallCRD bool
	// Setup runs once the cluster is ready, before the tests (e.g. to start
	// the operator); an error fails the package.
	Setup func(*Cluster) error
	// Teardown runs after the tests, before the cluster is deleted.
	Teardown func()
	// Audit turns on the API server's audit log for evictions and for every
	// request of a ServiceAccount; read it with AuditEvents.
	Audit bool
	// AuditPolicy, when set, is the audit policy instead of Audit's (and
	// turns the audit log on): make bench's BENCH_TRACE records every
	// request with it (TracePolicy).
	AuditPolicy string
	// RealNodes adds that many real nodes (a kubelet and a containerd each,
	// see StartRealNode) beside the fake ones, Ready before the tests run;
	// kwok then manages only the nodes annotated as fake. Needs root and
	// `make tools`.
	RealNodes int
	// KubeProxy serves the cluster's ClusterIPs to the real nodes' pods with
	// kube-proxy, so that in-cluster clients reach the API server through
	// the `kubernetes` Service, as on any cluster. One cluster of the machine
	// at a time has it (see kubeproxy.go). Needs RealNodes.
	KubeProxy bool
	// UnmanagedNodes makes kwok manage only the nodes annotated as fake
	// (FakeNode, AddNode), as with RealNodes: a test can then create a Node
	// that nobody runs, a dead node whose pods stay as the API server has
	// them.
	UnmanagedNodes bool
	// NoSpareNode leaves out the spare node (SpareNode) a cluster without
	// real nodes otherwise gets.
	NoSpareNode bool
	// KwokParallelism, when set, is how many pod stages, node stages and
	// node leases kwok works on at once (kwok's default is 4 each). With 4,
	// kwok marks pods Running and renews leases no faster than 4 API calls'
	// latency allows: on a loaded 2-core machine about 8 a second, too slow
	// for thousands of nodes (make bench's P8 raises it; nothing else does).
	KwokParallelism uint
	// HeartbeatFactor, when set, is kwokctl's --heartbeat-factor instead of
	// its default 5: it multiplies kwok's node lease duration (40 s; kwok
	// renews a lease every quarter of it) and kube-controller-manager's
	// --node-monitor-grace-period (40 s) and --node-monitor-period (5 s)
	// alike, so fake nodes renew their leases that many times less often
	// and still do not turn NotReady. At the default a lease lasts 200 s and
	// is renewed every 50 s: 100 renewals a second for 5000 nodes, more than
	// kwok gets through on a loaded 2-core machine beside the pods' status
	// updates (make bench's P8 raises it; nothing else does).
	HeartbeatFactor float64
	// ControllerManagerQPS, when set, is kube-controller-manager's
	// --kube-api-qps (its own default is 20, burst 30; the burst is set to
	// twice it): its node lifecycle controller adds and removes each new
	// node's not-ready taint with a patch each, so 5000 new nodes are
	// schedulable only after 10 000 patches, about 8 minutes at 20 a second
	// (make bench's P8 raises it; nothing else does). It is passed with
	// kwokctl's --extra-args, which v0.8.0 mishandles when combined with
	// RealNodes' or UnmanagedNodes' (see RealNodeKwokctlArgs): P8 sets
	// neither.
	ControllerManagerQPS int
}

// SpareNode is a fake Ready node no test maintains, in every cluster without
// real nodes unless Options.NoSpareNode: the operator refuses to maintain
// the last schedulable node of a cluster, and tests that drain their own
// nodes must not depend on what nodes other tests have at that moment. It
// has no pool label, so pods placed on a pool never land on it. Clusters
// with real nodes have none: pods of an in-cluster operator, which have no
// node selector, must run on a real node, not on a fake one.
const SpareNode = "nmt-spare"

// current is the cluster of the running test package, set by Main.
var current *Cluster

// AccEnv is the variable that turns on the tests that need a cluster, as
// terraform-plugin-testing's TF_ACC turns on acceptance tests: unset, a bare
// `go test ./...` runs unit tests only.
const AccEnv = "TF_ACC"

// Enabled reports whether AccEnv asks for the tests that need a cluster.
func Enabled() bool { return os.Getenv(AccEnv) != "" }

// Get returns the package's cluster. Without TF_ACC, or when Main did not
// start one, the test is skipped.
func Get(t testing.TB) *Cluster {
	t.Helper()
	if current == nil {
		if !Enabled() {
			t.Skip("needs a local cluster: run with TF_ACC=1, after `make tools` builds the cluster binaries (`make test` does both)")
		}
		t.Skip("needs the package cluster, which testcluster.Main did not start (TestMain must call it)")
	}
	return current
}

// Main starts one cluster for the package, runs its tests, dumps the cluster
// logs when a test failed, and always tears the cluster down. Use it as
//
//	func TestMain(m *testing.M) { os.Exit(testcluster.Main(m, testcluster.Options{InstallCRD: true})) }
//
// Without TF_ACC no cluster is started and the tests that need one skip
// themselves (Get), so the package's unit tests run alone.
func Main(m *testing.M, opts Options) int {
	if !Enabled() {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	c, err := StartWith(ctx, packageName(), opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: cannot start the test cluster: %v\n", err)
		if c != nil {
			c.DumpLogs(os.Stderr)
			c.Stop()
		}
		return 1
	}
	// A test binary stopped by Ctrl-C must not leave a control plane behind.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		c.Stop()
		os.Exit(130)
	}()
	defer c.Stop()

	if opts.InstallCRD {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		err := c.InstallCRD(ctx)
		cancel()
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
			c.DumpLogs(os.Stderr)
			return 1
		}
	}
	if opts.Setup != nil {
		if err := opts.Setup(c); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: test setup on cluster %s: %v\n", c.Name, err)
			c.DumpLogs(os.Stderr)
			return 1
		}
	}
	if opts.Teardown != nil {
		defer opts.Teardown()
	}
	current = c
	code := m.Run()
	if code != 0 {
		c.DumpLogs(os.Stderr)
	}
	return code
}

// Start creates a kwokctl cluster with the binary runtime, with the audit log
// of AuditEvents when audit is set. The caller must call Stop. On error a
// non-nil Cluster may be returned so logs can be dumped.
func Start(ctx context.Context, prefix string, audit bool) (*Cluster, error) {
	return StartWith(ctx, prefix, Options{Audit: audit})
}

// StartWith is Start with the cluster shape of opts (Audit, RealNodes); what
// Main does with the rest (CRD, Setup, Teardown) is the caller's.
func StartWith(ctx context.Context, prefix string, opts Options) (*Cluster, error) {
	if err := RequireTools("kwokctl", "kubectl", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages.yaml"); err != nil {
		return nil, err
	}
	if opts.RealNodes > 0 {
		if err := RealNodeRequirements(); err != nil {
			return nil, err
		}
	}
	if opts.KubeProxy && opts.RealNodes == 0 {
		return nil, fmt.Errorf("a kube-proxy (Options.KubeProxy) serves ClusterIPs to real nodes: set RealNodes too")
	}
	policyText := auditPolicy
	if opts.AuditPolicy != "" {
		policyText = opts.AuditPolicy
	}
	audit := opts.Audit || opts.AuditPolicy != ""
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	name := sanitize(fmt.Sprintf("nmt-%s-%s", prefix, hex.EncodeToString(suffix)))
	reapOrphans(ctx)
	workDir, err := os.MkdirTemp("", name+"-")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(workDir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	c := &Cluster{Name: name, workDir: workDir, KubeconfigPath: filepath.Join(workDir, "kubeconfig")}
	bin := ToolsBinDir()
	args := []string{
		"--config", filepath.Join(bin, "kwok-stages.yaml"),
		"create", "cluster", "--name", name, "--runtime", "binary",
		"--kubeconfig", filepath.Join(workDir, "kubeconfig.merged"),
		"--etcd-binary", filepath.Join(bin, "etcd"),
		"--kube-apiserver-binary", filepath.Join(bin, "kube-apiserver"),
		"--kube-controller-manager-binary", filepath.Join(bin, "kube-controller-manager"),
		"--kube-scheduler-binary", filepath.Join(bin, "kube-scheduler"),
		"--kwok-controller-binary", filepath.Join(bin, "kwok"),
		"--wait", "3m",
	}
	if audit {
		policy := filepath.Join(workDir, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(policyText), 0o644); err != nil {
			return c, err
		}
		args = append(args, "--kube-audit-policy", policy)
	}
	if opts.RealNodes > 0 || opts.UnmanagedNodes {
		args = append(args, RealNodeKwokctlArgs()...)
	}
	if opts.KwokParallelism > 0 {
		cfg := filepath.Join(workDir, "kwok-parallelism.yaml")
		if err := os.WriteFile(cfg, []byte(kwokParallelismConfig(opts.KwokParallelism)), 0o644); err != nil {
			return c, err
		}
		args = append([]string{"--config", cfg}, args...)
	}
	if opts.HeartbeatFactor > 0 {
		args = append(args, "--heartbeat-factor", strconv.FormatFloat(opts.HeartbeatFactor, 'f', -1, 64))
	}
	if opts.ControllerManagerQPS > 0 {
		args = append(args,
			"--extra-args", "kube-controller-manager=kube-api-qps="+strconv.Itoa(opts.ControllerManagerQPS),
			"--extra-args", "kube-controller-manager=kube-api-burst="+strconv.Itoa(2*opts.ControllerManagerQPS))
	}
	if opts.KubeProxy {
		cfg := filepath.Join(workDir, "kwokctl-kube-proxy.yaml")
		if err := os.WriteFile(cfg, []byte(KubeProxyKwokctlConfig()), 0o644); err != nil {
			return c, err
		}
		args = append([]string{"--config", cfg}, args...)
	}
	// kwokctl picks its ports by asking for free ones; two test packages
	// creating clusters at the same moment can pick the same port. Creating
	// one cluster at a time on the machine costs a few seconds and rules that out.
	unlock, err := lockFile(filepath.Join(os.TempDir(), "nmt-create.lock"))
	if err != nil {
		return c, err
	}
	_, err = c.kwokctl(ctx, args...)
	unlock()
	if err != nil {
		return c, err
	}
	kubeconfig, err := c.kwokctl(ctx, "get", "kubeconfig", "--name", name)
	if err != nil {
		return c, err
	}
	if err := os.WriteFile(c.KubeconfigPath, kubeconfig, 0o600); err != nil {
		return c, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.KubeconfigPath)
	if err != nil {
		return c, fmt.Errorf("load the kubeconfig of cluster %s: %w", name, err)
	}
	// Tests create many objects quickly; the default 5 QPS would make them slow.
	cfg.QPS, cfg.Burst = 200, 400
	c.RESTConfig = cfg
	if c.Client, err = client.New(cfg, client.Options{Scheme: Scheme}); err != nil {
		return c, err
	}
	if c.Clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		return c, err
	}
	// The default ServiceAccount appears shortly after the namespace; pods
	// created before that are rejected.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.Clientset.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return c, fmt.Errorf("cluster %s: the default ServiceAccount never appeared: %w", name, err)
	}
	if opts.RealNodes == 0 && !opts.NoSpareNode {
		if err := c.addSpareNode(ctx); err != nil {
			return c, err
		}
	}
	for i := 1; i <= opts.RealNodes; i++ {
		if err := c.AddRealNode(ctx, fmt.Sprintf("real%02d", i), nil); err != nil {
			return c, err
		}
	}
	if opts.KubeProxy {
		if err := StartKubeProxy(ctx, c.workDir, c.KubeconfigPath, c.RealNodes[0].Name); err != nil {
			return c, err
		}
	}
	return c, nil
}

// InstallCRD creates (or updates) the committed NodeMaintenance CRD, the way
// the operator does, and waits until the API server serves it.
func (c *Cluster) InstallCRD(ctx context.Context) error {
	return manager.InstallCRD(ctx, c.Client)
}

func sanitize(s string) string {
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteRune('-')
		}
	}
	return b.String()
}

// packageName is the last element of the test binary's package, from its name
// (go test names it <pkg>.test).
func packageName() string {
	return strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
}
