// Package testcluster runs a real Kubernetes control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler) with fake kwok nodes
// for integration and acceptance tests, using the binaries `make tools` built.
// One cluster serves one test package: start it from TestMain with Main.
package testcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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
		return nodeReady(node), nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: the spare node %s never became Ready: %w", c.Name, SpareNode, err)
	}
	return nil
}

// RealNodeKwokctlArgs are the `kwokctl create cluster` arguments for a
// cluster with real nodes (hack/cluster.sh passes the same). kwokctl v0.8.0
// panics on --extra-args unless each component's first one comes before any
// repeat, hence the interleaving.
func RealNodeKwokctlArgs() []string {
	return []string{
		// kwokctl starts kwok with --manage-all-nodes=true: kwok would take
		// over the kubelet's node. Manage only the fake ones.
		"--extra-args", "kwok-controller=manage-all-nodes=false",
		// Webhooks and aggregated APIs dial endpoint IPs: no kube-proxy needed.
		"--extra-args", "kube-apiserver=enable-aggregator-routing=true",
		"--extra-args", "kwok-controller=manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
		// logs and exec reach the kubelet at its node IP.
		"--extra-args", "kube-apiserver=kubelet-preferred-address-types=InternalIP",
		"--extra-args", "kube-apiserver=service-cluster-ip-range=" + ServiceCIDR,
	}
}

// AddRealNode starts a real node named name with extra labels, waits until
// it is Ready, and adds it to c.RealNodes; Stop tears it down.
func (c *Cluster) AddRealNode(ctx context.Context, name string, labels map[string]string) error {
	start := time.Now()
	n, err := StartRealNode(ctx, RealNodeConfig{Name: name, Dir: filepath.Join(c.workDir, "realnodes", name), Kubeconfig: c.KubeconfigPath, Labels: labels})
	if err != nil {
		return fmt.Errorf("start real node %s: %w", name, err)
	}
	c.RealNodes = append(c.RealNodes, n)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		node, err := c.Clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == "Ready" && cond.Status == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("real node %s did not become Ready: %w\n%s", name, err, n.LogTails(30))
	}
	fmt.Fprintf(os.Stderr, "real node %s Ready %s after its start\n", name, time.Since(start).Round(10*time.Millisecond))
	return nil
}

// stopRealNodes tears down every real node found under dir/realnodes.
func stopRealNodes(dir string) {
	nodes, _ := filepath.Glob(filepath.Join(dir, "realnodes", "*"))
	for _, n := range nodes {
		start := time.Now()
		if err := StopRealNode(n); err != nil {
			fmt.Fprintf(os.Stderr, "warning: stopping real node %s: %v\n", n, err)
			continue
		}
		fmt.Fprintf(os.Stderr, "real node %s stopped and removed in %s\n", filepath.Base(n), time.Since(start).Round(10*time.Millisecond))
	}
}

// lockFile takes an exclusive lock shared by every test process on the machine.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// holdLock takes the exclusive lock of path, waiting for it until ctx ends,
// and writes owner into it, for the error of whoever waits next. The lock is
// the open file's: it lasts until every copy of the file (a child process's
// inherited one too) is closed.
func holdLock(ctx context.Context, path, owner string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			holder, _ := os.ReadFile(path)
			f.Close()
			return nil, fmt.Errorf("%s is still held by %s", path, strings.TrimSpace(string(holder)))
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(owner+"\n"), 0)
	}
	return f, nil
}

// ownerFile in a cluster's scratch directory holds the pid of the test
// process that started it.
const ownerFile = "owner.pid"

// reapOrphans deletes the clusters of test processes that died without
// tearing down (a panic, a go test -timeout, a kill): each holds about 600 MB.
func reapOrphans(ctx context.Context) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "nmt-*", ownerFile))
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || syscall.Kill(pid, 0) == nil {
			continue // alive (or unreadable): not ours to touch
		}
		dir := filepath.Dir(f)
		stopRealNodes(dir)
		StopKubeProxy(dir)
		clusters, _ := os.ReadDir(filepath.Join(dir, "kwok", "clusters"))
		for _, cl := range clusters {
			orphan := &Cluster{Name: cl.Name(), workDir: dir}
			if _, err := orphan.kwokctl(ctx, "delete", "cluster", "--name", cl.Name()); err != nil {
				fmt.Fprintf(os.Stderr, "warning: could not delete orphaned test cluster %s: %v\n", cl.Name(), err)
				continue
			}
			fmt.Fprintf(os.Stderr, "deleted orphaned test cluster %s (its test process %d is gone)\n", cl.Name(), pid)
		}
		_ = os.RemoveAll(dir)
	}
}

// Stop deletes the cluster and its scratch directory. It is safe to call twice.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		stopRealNodes(c.workDir)
		StopKubeProxy(c.workDir)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if out, err := c.kwokctl(ctx, "delete", "cluster", "--name", c.Name); err != nil {
			fmt.Fprintf(os.Stderr, "warning: deleting test cluster %s: %v\n%s\n", c.Name, err, out)
		}
		_ = os.RemoveAll(c.workDir)
	})
}

// InstallCRD creates (or updates) the committed NodeMaintenance CRD, the way
// the operator does, and waits until the API server serves it.
func (c *Cluster) InstallCRD(ctx context.Context) error {
	return manager.InstallCRD(ctx, c.Client)
}

// Kubectl runs the pinned kubectl against the cluster and returns its
// combined output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd, err := command("kubectl", append([]string{"--kubeconfig", c.KubeconfigPath}, args...)...)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = runContext(ctx, cmd)
	if err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// DumpLogs writes the tail of every component's log to w and the full logs
// to .local/test-logs/<cluster>/ in the repository.
func (c *Cluster) DumpLogs(w *os.File) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(os.TempDir(), c.Name+"-logs")
	if root, err := RepoRoot(); err == nil {
		dir = filepath.Join(root, ".local", "test-logs", c.Name)
	}
	_ = os.MkdirAll(dir, 0o755)
	fmt.Fprintf(w, "\n=== cluster %s logs (full logs in %s)\n", c.Name, dir)
	for _, comp := range Components {
		out, err := c.kwokctl(ctx, "logs", comp, "--name", c.Name)
		if err != nil {
			fmt.Fprintf(w, "--- %s: cannot read logs: %v\n", comp, err)
			continue
		}
		_ = os.WriteFile(filepath.Join(dir, comp+".log"), out, 0o644)
		fmt.Fprintf(w, "--- %s (last lines)\n%s\n", comp, tail(string(out), 15))
	}
	for _, n := range c.RealNodes {
		fmt.Fprint(w, n.LogTails(15))
	}
}

func (c *Cluster) kwokctl(ctx context.Context, args ...string) ([]byte, error) {
	cmd, err := command("kwokctl", args...)
	if err != nil {
		return nil, err
	}
	// kwokctl's binary runtime passes its environment on to every component:
	// kube-apiserver must not send what it dials (webhooks, kubelets)
	// through a proxy.
	cmd.Env = localEnv("KWOK_WORKDIR=" + filepath.Join(c.workDir, "kwok"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := runContext(ctx, cmd); err != nil {
		return stdout.Bytes(), fmt.Errorf("kwokctl %s: %w\n%s", strings.Join(args, " "), err, tail(stderr.String(), 30))
	}
	return stdout.Bytes(), nil
}

// runContext runs cmd and kills it when ctx ends.
func runContext(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return errors.Join(ctx.Err(), fmt.Errorf("%s was killed", filepath.Base(cmd.Path)))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
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
