package testcluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

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
