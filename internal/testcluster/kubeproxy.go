package testcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// A real node's pods reach Services the way they do on any cluster: through
// ClusterIPs that kube-proxy (iptables mode, built from the same Kubernetes
// source, with Debian's iptables) turns into endpoint addresses. That is what
// an in-cluster client of the API server needs: every pod is told
// KUBERNETES_SERVICE_HOST=<first address of ServiceCIDR>.
//
// All real nodes of this machine share its network namespace, so one
// kube-proxy serves them all. Its rules are the machine's: two at once would
// overwrite each other's chains, so a machine-wide lock lets one cluster at
// a time serve ClusterIPs. A packet to a ClusterIP is rewritten in nat
// PREROUTING, before routing, so the unreachable route of BlockServiceCIDR
// stays in place: whatever kube-proxy does not rewrite (no Service, no
// endpoint) still cannot leave the machine.

// KubernetesServiceIP is the ClusterIP of the API server's `kubernetes`
// Service: the first address of ServiceCIDR.
func KubernetesServiceIP() string {
	_, n, err := net.ParseCIDR(ServiceCIDR)
	if err != nil {
		panic(err)
	}
	ip := n.IP.To4()
	return net.IPv4(ip[0], ip[1], ip[2], ip[3]+1).String()
}

// KubeProxyKwokctlConfig is a `kwokctl --config` file that adds the
// `kubernetes` Service's ClusterIP to the API server's certificate (kwokctl
// puts this machine's addresses there, not that one), so that in-cluster
// clients can verify it.
func KubeProxyKwokctlConfig() string {
	return fmt.Sprintf(`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
options:
  kubeApiserverCertSANs: [%q]
`, KubernetesServiceIP())
}

// kubeProxyLock is held while a kube-proxy of this machine runs: by the
// kube-proxy process itself, which inherits it, so that it stays held after
// its starter is gone (`make cluster-up`) and ends with the process.
var kubeProxyLock = filepath.Join(os.TempDir(), "nmt-kube-proxy.lock")

// StartKubeProxy runs kube-proxy in dir/kube-proxy, for the cluster of
// kubeconfig, as the proxy of the real node named node (it takes that Node's
// addresses), once the machine's lock is held. It returns once the
// `kubernetes` Service is programmed. When another cluster's kube-proxy
// holds the lock, it waits for it until ctx ends, and then says which.
func StartKubeProxy(ctx context.Context, dir, kubeconfig, node string) error {
	bin, err := Tool("kube-proxy")
	if err != nil {
		return err
	}
	for _, b := range []string{"iptables", "iptables-save", "iptables-restore"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("kube-proxy needs %s (run `make tools`: hack/apt.sh installs iptables)", b)
		}
	}
	dir = filepath.Join(dir, "kube-proxy")
	lock, err := holdLock(ctx, kubeProxyLock, dir)
	if err != nil {
		return fmt.Errorf("kube-proxy for node %s: %w: one kube-proxy at a time can own this machine's ClusterIP rules; stop the other cluster (make cluster-down, or the test that runs it)", node, err)
	}
	// The kube-proxy process holds the lock from here on.
	defer lock.Close()
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return err
	}
	healthz, err := freeTCPPort()
	if err != nil {
		return err
	}
	metrics, err := freeTCPPort()
	if err != nil {
		return err
	}
	// Sysctls are left as they are: conntrack sizes and timeouts are the
	// machine's, and localhost NodePorts would need route_localnet.
	cfg := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %q
hostnameOverride: %q
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  localhostNodePorts: false
  syncPeriod: 10s
  minSyncPeriod: 0s
`, kubeconfig, node, healthz, metrics)
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	for _, ipt := range []string{"iptables", "ip6tables"} {
		if exec.Command(ipt, "-S", kubeletFirewallChain).Run() == nil {
			_ = os.WriteFile(filepath.Join(dir, ipt+"-"+kubeletFirewallChain+".before"), nil, 0o644)
		}
	}
	if err := startDaemonEnv(dir, nil, []*os.File{lock}, "kube-proxy", bin, "--config", filepath.Join(dir, "config.yaml"), "--v", "2"); err != nil {
		return err
	}
	started := time.Now()
	svcIP := KubernetesServiceIP()
	err = waitFor(ctx, time.Minute, func() error {
		out, err := exec.CommandContext(ctx, "iptables-save", "-t", "nat").CombinedOutput()
		if err != nil {
			return fmt.Errorf("iptables-save: %w: %s", err, out)
		}
		if !containsLine(string(out), svcIP+"/32", "default/kubernetes:https") {
			return fmt.Errorf("kube-proxy has not programmed %s (default/kubernetes) yet", svcIP)
		}
		return nil
	})
	if err != nil {
		b, _ := os.ReadFile(filepath.Join(dir, "logs", "kube-proxy.log"))
		return fmt.Errorf("%w\n--- kube-proxy log (last lines)\n%s", err, tail(string(b), 30))
	}
	fmt.Fprintf(os.Stderr, "kube-proxy serves ClusterIPs %s after its start\n", time.Since(started).Round(10*time.Millisecond))
	return nil
}

// StopKubeProxy stops the kube-proxy of StartKubeProxy(dir), if any, and
// removes its rules; the machine's lock goes with the process.
func StopKubeProxy(dir string) {
	dir = filepath.Join(dir, "kube-proxy")
	if readPid(dir, "kube-proxy") == 0 {
		return
	}
	stopDaemon(dir, "kube-proxy", 10*time.Second)
	if bin, err := Tool("kube-proxy"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "--cleanup", "--config", filepath.Join(dir, "config.yaml"))
		cmd.Env = localEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			// --cleanup also tries the modes that never ran and reports them.
			_ = os.WriteFile(filepath.Join(dir, "logs", "cleanup.log"), out, 0o644)
		}
	}
	// kube-proxy creates a copy of the kubelet's firewall chain (empty here)
	// and --cleanup leaves it; the real nodes' kubelets make no chains.
	for _, ipt := range []string{"iptables", "ip6tables"} {
		if _, err := os.Stat(filepath.Join(dir, ipt+"-"+kubeletFirewallChain+".before")); err == nil {
			continue
		}
		for _, from := range []string{"INPUT", "OUTPUT"} {
			_ = exec.Command(ipt, "-D", from, "-j", kubeletFirewallChain).Run()
		}
		_ = exec.Command(ipt, "-F", kubeletFirewallChain).Run()
		_ = exec.Command(ipt, "-X", kubeletFirewallChain).Run()
	}
	_ = os.Remove(filepath.Join(dir, "kube-proxy.pid"))
}

// kubeletFirewallChain is the chain kube-proxy makes for the kubelet.
const kubeletFirewallChain = "KUBE-FIREWALL"

// containsLine reports whether one line of s contains every part.
func containsLine(s string, parts ...string) bool {
	for _, line := range strings.Split(s, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
