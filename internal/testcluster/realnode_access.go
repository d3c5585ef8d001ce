package testcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

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
