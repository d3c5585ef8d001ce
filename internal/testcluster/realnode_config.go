package testcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// NodeStatusUpdateFrequency is how often a real node's kubelet posts its
// node status (its KubeletConfiguration's nodeStatusUpdateFrequency, which
// also makes nodeStatusReportFrequency): every post stamps the heartbeats of
// its conditions.
const NodeStatusUpdateFrequency = 2 * time.Second

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
nodeStatusUpdateFrequency: %[7]s
`, cgroupRootName(id), n.socket(), n.InternalIP, kubeletPort, filepath.Join(dir, "pod-logs"), filepath.Join(dir, "volume-plugins"), NodeStatusUpdateFrequency),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}
