package testcluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
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

// proxyVars are cleared for every process a cluster runs: each of them talks
// to this machine only.
var proxyVars = []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy"}

// localEnv is the environment without the proxy variables, plus extra.
func localEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, p := range proxyVars {
			if name == p {
				drop = true
				break
			}
		}
		if !drop {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

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

func writeRealNodeFiles(n *RealNode, id string, cfg RealNodeConfig) error {
	dir := n.Dir
	kubeletPort, err := freeTCPPort()
	if err != nil {
		return err
	}
	files := map[string]string{
		"containerd.toml": fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  # root here lacks CAP_SYS_RESOURCE: without this every sandbox fails with
  # "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
`, filepath.Join(dir, "containerd/root"), filepath.Join(dir, "containerd/state"), n.socket(), n.socket()+".ttrpc",
			filepath.Join(dir, "containerd/opt"), SandboxImage, cniBinDir, filepath.Join(dir, "cni/net.d")),
		// A CNI configuration must exist even for hostNetwork pods, or the
		// node stays NotReady. Pods get an address on a private /24 behind a
		// bridge of their own and no default route: they reach this machine
		// and each other, nothing else. The Service range goes through this
		// machine too, where a kube-proxy (Options.KubeProxy) serves it or
		// the unreachable route of BlockServiceCIDR ends it.
		"cni/net.d/10-nodemaintenance.conflist": fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "nm-%[1]s",
  "plugins": [{
    "type": "bridge",
    "bridge": "nm%[1]s",
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": %[2]q}]], "dataDir": %[3]q,
      "routes": [{"dst": %[4]q}]}
  }]
}
`, id, n.PodSubnet, filepath.Join(dir, "cni/ipam"), ServiceCIDR),
		"kubelet.yaml": fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 on this machine, and no systemd as PID 1.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%[1]s
failSwapOn: false
containerRuntimeEndpoint: unix://%[2]s
# The kwokctl API server has no kubelet client certificate.
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
address: %[3]s
port: %[4]d
readOnlyPort: 0
healthzPort: 0
makeIPTablesUtilChains: false
resolvConf: ""
podLogsDir: %[5]s
volumePluginDir: %[6]s
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
  imagefs.inodesFree: 1%%
nodeStatusUpdateFrequency: 2s
`, cgroupRootName(id), n.socket(), n.InternalIP, kubeletPort, filepath.Join(dir, "pod-logs"), filepath.Join(dir, "volume-plugins")),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (n *RealNode) socket() string { return filepath.Join(n.Dir, "containerd.sock") }

func (n *RealNode) ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", n.socket(), "--namespace", "k8s.io"}, args...)...)
	cmd.Env = localEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ImportImage imports a docker-archive or OCI archive (e.g. the operator
// image `make image` writes) into the node's containerd, where the kubelet
// finds it under its tag without pulling.
func (n *RealNode) ImportImage(ctx context.Context, archive string) error {
	if out, err := n.ctr(ctx, "images", "import", "--snapshotter", "overlayfs", archive); err != nil {
		return fmt.Errorf("import %s into real node %s: %w\n%s", archive, n.Name, err, out)
	}
	return nil
}

// Processes lists the pids of the processes in the node's cgroups: its
// containers' (sandboxes included). A test reads their /proc entries to see
// what really runs, e.g. under which uid and gid.
func (n *RealNode) Processes() []int {
	seen := map[int]bool{}
	var pids []int
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, cgroupRootName(shortID(n.Dir))), func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && !seen[pid] && pidAlive(pid) {
					seen[pid] = true
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	sort.Ints(pids)
	return pids
}

// PodLog returns what the containers of pod ns/name wrote on the node, as the
// kubelet keeps it (CRI log lines, every container and restart), read from
// the node's pod log directory: it is there while the pod exists, without a
// round trip through the API server.
func (n *RealNode) PodLog(ns, name string) (string, error) {
	files, err := filepath.Glob(filepath.Join(n.Dir, "pod-logs", ns+"_"+name+"_*", "*", "*.log"))
	if err != nil {
		return "", err
	}
	if len(files) == 0 {
		return "", fmt.Errorf("no container log of pod %s/%s on real node %s", ns, name, n.Name)
	}
	var b strings.Builder
	for _, f := range files {
		out, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		b.Write(out)
	}
	return b.String(), nil
}

// LogTails returns the last lines of the node's containerd and kubelet logs.
func (n *RealNode) LogTails(lines int) string {
	var b strings.Builder
	for _, d := range []string{"containerd", "kubelet"} {
		out, err := os.ReadFile(filepath.Join(n.Dir, "logs", d+".log"))
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "--- real node %s: %s (last lines; full log in %s)\n%s\n", n.Name, d, filepath.Join(n.Dir, "logs", d+".log"), tail(string(out), lines))
	}
	return b.String()
}

// startDaemon starts a process in its own session, so that a signal to the
// starter (Ctrl-C of `go test`) does not reach it before the teardown runs,
// with its output in logs/NAME.log and its pid in NAME.pid.
func startDaemon(dir, name, bin string, args ...string) error {
	return startDaemonEnv(dir, nil, nil, name, bin, args...)
}

// noPullEnv sends a real node's image pulls to a closed local port.
var noPullEnv = []string{"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9"}

// startDaemonEnv is startDaemon with extra environment variables and extra
// open files (fd 3 on) for the process.
func startDaemonEnv(dir string, env []string, files []*os.File, name, bin string, args ...string) error {
	logFile, err := os.OpenFile(filepath.Join(dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = localEnv(env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = files
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	// Reap it when it ends, if this process is still there.
	go func() { _ = cmd.Wait() }()
	return os.WriteFile(filepath.Join(dir, name+".pid"), []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

// StopRealNode stops the node whose directory is dir and removes everything
// it left: its containers (killed through its containerd), the kubelet,
// containerd and their shims, the mounts under dir, its cgroups, its bridge,
// and dir itself. It is safe on a node that is half started or already gone.
func StopRealNode(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(dir, "id"))
	if errors.Is(err, os.ErrNotExist) {
		return os.RemoveAll(dir)
	}
	if err != nil {
		return err
	}
	id := strings.TrimSpace(string(b))
	n := &RealNode{Dir: dir}
	var errs []error
	steps := newStepTimer()
	defer steps.reportIfSlow(dir, 10*time.Second)
	stopDaemon(dir, "kubelet", 15*time.Second)
	steps.done("kubelet")
	// The kubelet is gone, so nothing recreates containers: kill every
	// process in the node's cgroups (its containers, sandboxes included).
	// Through containerd's API that took up to a minute under load.
	killCgroupProcesses(id)
	steps.done("containers")
	stopDaemon(dir, "containerd", 15*time.Second)
	steps.done("containerd")
	// Shims of tasks that could not be deleted: the ones started for this
	// node's socket, and nothing else.
	for _, pid := range processesMentioning(n.socket()) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if err := unmountUnder(dir); err != nil {
		errs = append(errs, err)
	}
	steps.done("unmount")
	removeCgroupRoot(id)
	steps.done("cgroups")
	if _, err := os.Stat("/sys/class/net/nm" + id); err == nil {
		if out, err := exec.Command("ip", "link", "delete", "nm"+id).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("delete bridge nm%s: %w: %s", id, err, out))
		}
	}
	releasePodSubnet(dir)
	if b, err := os.ReadFile(filepath.Join(dir, "ip_forward.before")); err == nil && strings.TrimSpace(string(b)) == "0" && !otherBridges("nm"+id) {
		_ = os.WriteFile(ipForwardSysctl, []byte("0\n"), 0o644)
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

const ipForwardSysctl = "/proc/sys/net/ipv4/ip_forward"

// otherBridges reports whether another real node's bridge is up.
func otherBridges(except string) bool {
	links, _ := filepath.Glob("/sys/class/net/nm*")
	for _, l := range links {
		if filepath.Base(l) != except {
			return true
		}
	}
	return false
}

// stepTimer tells where a slow teardown spent its time.
type stepTimer struct {
	last  time.Time
	start time.Time
	steps []string
}

func newStepTimer() *stepTimer { now := time.Now(); return &stepTimer{last: now, start: now} }

func (s *stepTimer) done(step string) {
	now := time.Now()
	s.steps = append(s.steps, fmt.Sprintf("%s %s", step, now.Sub(s.last).Round(10*time.Millisecond)))
	s.last = now
}

func (s *stepTimer) reportIfSlow(dir string, limit time.Duration) {
	if took := time.Since(s.start); took > limit {
		fmt.Fprintf(os.Stderr, "stopping real node %s took %s: %s\n", dir, took.Round(10*time.Millisecond), strings.Join(s.steps, ", "))
	}
}

func readPid(dir, name string) int {
	b, err := os.ReadFile(filepath.Join(dir, name+".pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func pidAlive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	// A zombie (exited, not reaped by its parent) is not running.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// stopDaemon ends the process of NAME.pid: SIGTERM, then SIGKILL after grace.
func stopDaemon(dir, name string, grace time.Duration) {
	pid := readPid(dir, name)
	if !pidAlive(pid) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for pidAlive(pid) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if pidAlive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		for i := 0; i < 50 && pidAlive(pid); i++ {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// processesMentioning lists the processes whose command line contains s.
func processesMentioning(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// unmountUnder detaches every mount at or below dir, deepest first
// (container root filesystems, network namespaces, pod volumes).
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountPath(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mounts = append(mounts, mp)
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	var errs []error
	for _, mp := range mounts {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// The kubelet's cgroupfs driver wants its cgroup root to exist. Each node
// gets its own, so two real nodes on one machine never share /kubepods.
func cgroupRootName(id string) string { return "nodemaintenance-" + id }

// cgroupHierarchies lists the mounted cgroup v1 hierarchies (and a v2 one).
func cgroupHierarchies() []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var dirs []string
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		fs := strings.Fields(post)
		fields := strings.Fields(pre)
		if len(fs) > 0 && (fs[0] == "cgroup" || fs[0] == "cgroup2") && len(fields) >= 5 {
			dirs = append(dirs, unescapeMountPath(fields[4]))
		}
	}
	return dirs
}

func makeCgroupRoot(id string) error {
	for _, h := range cgroupHierarchies() {
		d := filepath.Join(h, cgroupRootName(id))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", d, err)
		}
		// A new v1 cpuset has no CPUs and memory nodes: give it its parent's.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if cur, _ := os.ReadFile(filepath.Join(d, f)); len(bytes.TrimSpace(cur)) == 0 {
					_ = os.WriteFile(filepath.Join(d, f), v, 0o644)
				}
			}
		}
	}
	return nil
}

// killCgroupProcesses SIGKILLs every process in the node's cgroups and
// waits a little for them to go.
func killCgroupProcesses(id string) {
	for try := 0; try < 50; try++ {
		found := false
		for _, h := range cgroupHierarchies() {
			_ = filepath.WalkDir(filepath.Join(h, cgroupRootName(id)), func(p string, d os.DirEntry, err error) error {
				if err != nil || !d.IsDir() {
					return nil
				}
				b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil && pidAlive(pid) {
						found = true
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				return nil
			})
		}
		if !found {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeCgroupRoot removes the node's cgroups, deepest first; its processes
// are gone by then.
func removeCgroupRoot(id string) {
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, cgroupRootName(id))
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			_ = syscall.Rmdir(d)
		}
	}
}

// BlockServiceCIDR makes ServiceCIDR unreachable from this machine (and so
// from pods, which route through it), so that nothing sent to a ClusterIP
// leaves it. Idempotent.
func BlockServiceCIDR() error {
	out, err := exec.Command("ip", "route", "replace", "unreachable", ServiceCIDR).CombinedOutput()
	if err != nil {
		return fmt.Errorf("make the Service range %s unreachable (ip route replace unreachable %s): %w: %s", ServiceCIDR, ServiceCIDR, err, out)
	}
	return nil
}

// machineAddress is this machine's first global IPv4 address: the kubelet
// refuses a loopback node IP.
func machineAddress() (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 || strings.HasPrefix(iface.Name, "nm") {
			continue
		}
		addrs, _ := iface.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", fmt.Errorf("this machine has no global IPv4 address for the kubelet's node IP")
}

// podSubnetClaims holds one file per 10.244.N.0/24 in use by a real node of
// this machine, naming the node's directory: a node's bridge appears only
// with its first pod, so routes alone do not tell which subnets are taken.
var podSubnetClaims = filepath.Join(os.TempDir(), "nm-realnode-subnets")

// claimPodSubnet picks a 10.244.N.0/24 that no route of this machine covers
// and no live real node claims, and claims it for dir.
func claimPodSubnet(dir string) (string, error) {
	if err := os.MkdirAll(podSubnetClaims, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(podSubnetClaims, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	out, err := exec.Command("ip", "-4", "route", "show", "table", "all").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ip route: %w: %s", err, out)
	}
	for i := 0; i < 256; i++ {
		claim := filepath.Join(podSubnetClaims, strconv.Itoa(i))
		if owner, err := os.ReadFile(claim); err == nil {
			if _, err := os.Stat(strings.TrimSpace(string(owner))); err == nil {
				continue // a live node's
			}
		}
		if bytes.Contains(out, []byte(fmt.Sprintf("%s%d.", realNodeSubnetPrefix, i))) {
			continue
		}
		if err := os.WriteFile(claim, []byte(dir+"\n"), 0o644); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, "subnet"), []byte(strconv.Itoa(i)+"\n"), 0o644); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s%d.0/24", realNodeSubnetPrefix, i), nil
	}
	return "", fmt.Errorf("no free /24 under %s0.0/16 for pods", realNodeSubnetPrefix)
}

func releasePodSubnet(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, "subnet"))
	if err != nil {
		return
	}
	claim := filepath.Join(podSubnetClaims, strings.TrimSpace(string(b)))
	if owner, err := os.ReadFile(claim); err == nil && strings.TrimSpace(string(owner)) == dir {
		_ = os.Remove(claim)
	}
}

func freeTCPPort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// shortID names the node's bridge (at most 15 bytes with its "nm" prefix)
// and cgroup root after its directory.
func shortID(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return hex.EncodeToString(sum[:])[:8]
}

func waitFor(ctx context.Context, timeout time.Duration, try func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := try()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}
