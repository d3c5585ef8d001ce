package testcluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

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
