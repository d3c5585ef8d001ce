package testcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// A real node is a kubelet, built from the same Kubernetes source as the
// control plane, with its own containerd (Debian's, with runc and the CNI
// plugins), beside kwok's fake nodes. Everything it owns lives in one
// directory: containerd's root, state and socket, the kubelet's root and
// certificates, the CNI configuration and IP allocations, the logs and the
// pid files. StopRealNode needs only that directory, so a node outlives the
// process that started it (hack/realnode, for `make cluster-up REAL_NODES=1`)
// and is still torn down completely.
const (
	// RealNodeLabel marks the nodes a kubelet runs.
	RealNodeLabel = "nodemaintenance.test/real-node"
	// ServiceCIDR is kube-apiserver's default Service range, which kwokctl
	// keeps. With no kube-proxy nothing serves a ClusterIP, so a connection
	// to one (every pod gets KUBERNETES_SERVICE_HOST) would leave the machine
	// by the default route: a real node makes the range unreachable first.
	ServiceCIDR = "10.0.0.0/24"
	// WaiterImage runs internal/testcluster/waiter: it blocks until SIGTERM,
	// says so and exits after EXIT_DELAY. Only real nodes have it; it is
	// never pulled (use imagePullPolicy Never).
	WaiterImage = "localhost/nodemaintenance/waiter:1"
	// SandboxImage is every pod sandbox's (pause) image on a real node: the
	// same program.
	SandboxImage = "localhost/nodemaintenance/pause:1"
	// realNodeSubnetPrefix is where a node's pod /24 is picked from
	// (10.244.N.0/24): one not routed yet on this machine.
	realNodeSubnetPrefix = "10.244."
)

// RealNodeConfig says what node to start.
type RealNodeConfig struct {
	// Name is the Node's name.
	Name string
	// Dir is created and holds everything the node owns; keep it short
	// (containerd's socket lives there and a socket path has at most 107 bytes).
	Dir string
	// Kubeconfig is the cluster's admin kubeconfig, which the kubelet uses.
	Kubeconfig string
	// Labels are added to the node besides RealNodeLabel=true.
	Labels map[string]string
}

// RealNode is a running real node.
type RealNode struct {
	Name string
	// Dir holds everything the node owns (see RealNodeConfig.Dir).
	Dir string
	// HostDir is a directory of this machine that pods may mount as a
	// hostPath to leave files behind them (e.g. the waiter's SIGNAL_LOG).
	HostDir string
	// InternalIP is the node's address: one of this machine's.
	InternalIP string
	// PodSubnet is the private /24 that the node's pods get addresses from.
	PodSubnet string
}

// RealNodeRequirements names what a real node needs that is missing, or
// returns nil: root, the kubelet from `make tools`, and containerd, runc and
// the CNI plugins from Debian (hack/apt.sh).
func RealNodeRequirements() error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (the kubelet and containerd mount, create cgroups and network namespaces)")
	}
	if _, err := Tool("kubelet"); err != nil {
		missing = append(missing, err.Error())
	}
	for _, bin := range []string{"containerd", "ctr", "runc", "containerd-shim-runc-v2", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin+" (run `make tools`: hack/apt.sh installs it)")
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, plugin)); err != nil {
			missing = append(missing, "CNI plugin "+plugin+" in "+cniBinDir+" (run `make tools`: hack/apt.sh installs containernetworking-plugins)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("a real node needs: %s", strings.Join(missing, "; "))
	}
	return nil
}

const cniBinDir = "/usr/lib/cni"

// StartRealNode starts containerd and a kubelet that registers cfg.Name
// with the cluster. It returns once both run; the node becomes Ready a
// moment later. On error what was started is stopped again.
func StartRealNode(ctx context.Context, cfg RealNodeConfig) (n *RealNode, err error) {
	if err := RealNodeRequirements(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if len(filepath.Join(dir, "containerd.sock.ttrpc")) > 100 {
		return nil, fmt.Errorf("real node directory %s is too long for containerd's socket path", dir)
	}
	if err := BlockServiceCIDR(); err != nil {
		return nil, err
	}
	ip, err := machineAddress()
	if err != nil {
		return nil, err
	}
	id := shortID(dir)
	n = &RealNode{Name: cfg.Name, Dir: dir, HostDir: filepath.Join(dir, "host"), InternalIP: ip}
	for _, d := range []string{"containerd/root", "containerd/state", "kubelet", "kubelet-certs", "pod-logs", "volume-plugins", "cni/net.d", "cni/ipam", "logs", "host"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	// From here on StopRealNode finds whatever was started.
	if err := os.WriteFile(filepath.Join(dir, "id"), []byte(id+"\n"), 0o644); err != nil {
		return nil, err
	}
	// The CNI bridge plugin turns IP forwarding on; the teardown puts back
	// what was there.
	if b, err := os.ReadFile(ipForwardSysctl); err == nil {
		_ = os.WriteFile(filepath.Join(dir, "ip_forward.before"), b, 0o644)
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, n.LogTails(20))
			if stopErr := StopRealNode(dir); stopErr != nil {
				err = fmt.Errorf("%w (and stopping it again: %v)", err, stopErr)
			}
		}
	}()
	if n.PodSubnet, err = claimPodSubnet(dir); err != nil {
		return n, err
	}
	if err := writeRealNodeFiles(n, id, cfg); err != nil {
		return n, err
	}
	if err := BuildImage("./internal/testcluster/waiter", filepath.Join(dir, "images.tar"), WaiterImage, SandboxImage); err != nil {
		return n, err
	}
	if err := makeCgroupRoot(id); err != nil {
		return n, err
	}
	// Images come from archives only (imagePullPolicy Never or IfNotPresent
	// of an imported tag). Should a pod name another, the pull goes to a
	// proxy that is not there and fails here instead of leaving the machine.
	if err := startDaemonEnv(dir, noPullEnv, nil, "containerd", "containerd", "--config", filepath.Join(dir, "containerd.toml")); err != nil {
		return n, err
	}
	if err := waitFor(ctx, 30*time.Second, func() error { _, err := n.ctr(ctx, "version"); return err }); err != nil {
		return n, fmt.Errorf("containerd did not answer on %s: %w", n.socket(), err)
	}
	if out, err := n.ctr(ctx, "images", "import", "--snapshotter", "overlayfs", filepath.Join(dir, "images.tar")); err != nil {
		return n, fmt.Errorf("import the node's images: %w\n%s", err, out)
	}
	kubelet, _ := Tool("kubelet")
	labels := []string{RealNodeLabel + "=true"}
	for k, v := range cfg.Labels {
		labels = append(labels, k+"="+v)
	}
	sort.Strings(labels)
	if err := startDaemon(dir, "kubelet", kubelet,
		"--config", filepath.Join(dir, "kubelet.yaml"),
		"--kubeconfig", cfg.Kubeconfig,
		"--hostname-override", cfg.Name,
		"--node-ip", ip,
		"--node-labels", strings.Join(labels, ","),
		"--root-dir", filepath.Join(dir, "kubelet"),
		"--cert-dir", filepath.Join(dir, "kubelet-certs"),
		"--v", "2",
	); err != nil {
		return n, err
	}
	return n, nil
}

// shortID names the node's bridge (at most 15 bytes with its "nm" prefix)
// and cgroup root after its directory.
func shortID(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return hex.EncodeToString(sum[:])[:8]
}
