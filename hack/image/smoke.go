package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// smokeTest loads the host-platform docker-archive from dir into a podman
// store of its own (so nothing else on the machine sees the image) and runs
// it: --version must print the stamped version, and a plain start must log
// that it runs as 65532:65532 before it gives up finding a cluster.
//
// runc, not crun: crun fails here with "cgroups in hybrid mode not
// supported". The ulimits: root on these machines lacks CAP_SYS_RESOURCE, so
// podman's default (raising them) fails.
func smokeTest(o options, dir string) error {
	p, ok := o.hostPlatform()
	if !ok {
		return fmt.Errorf("-smoke: the image has no %s platform to run here", runtime.GOOS+"/"+runtime.GOARCH)
	}
	if _, err := exec.LookPath("podman"); err != nil {
		return fmt.Errorf("-smoke needs podman and runc (hack/apt.sh installs them): %w", err)
	}
	store, err := os.MkdirTemp("", "image-smoke-")
	if err != nil {
		return err
	}
	podman := func(args ...string) *exec.Cmd {
		return exec.Command("podman", append([]string{"--root", filepath.Join(store, "root"),
			"--runroot", filepath.Join(store, "run"), "--runtime", "runc"}, args...)...)
	}
	defer func() {
		// reset unmounts what the store still has mounted, then empties it.
		if out, err := podman("system", "reset", "--force").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "image: podman system reset: %v: %s\n", err, out)
		}
		os.RemoveAll(store)
	}()

	archive := filepath.Join(dir, binaryName+"-"+p.dir()+".docker.tar")
	if out, err := podman("load", "--quiet", "--input", archive).CombinedOutput(); err != nil {
		return fmt.Errorf("podman load %s: %w: %s", archive, err, out)
	}
	run := func(args ...string) (stdout, stderr string, err error) {
		cmd := podman(append([]string{"run", "--rm", "--network", "none",
			"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", o.ref}, args...)...)
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		err = cmd.Run()
		return so.String(), se.String(), err
	}

	out, errOut, err := run("--version")
	if err != nil {
		return fmt.Errorf("podman run %s --version: %w: %s", o.ref, err, errOut)
	}
	fmt.Fprintf(os.Stderr, "image: podman run %s --version: %s", o.ref, out)
	if want := "node-maintenance-operator " + o.version + " "; !strings.HasPrefix(out, want) {
		return fmt.Errorf("podman run %s --version printed %q, want it to start with %q", o.ref, out, want)
	}

	// No cluster in the container: the operator logs its start and exits 1.
	_, errOut, err = run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		return fmt.Errorf("podman run %s: want exit status 1 (no cluster), got %v: %s", o.ref, err, errOut)
	}
	for _, want := range []string{`"msg":"starting node-maintenance-operator"`, `"uid":65532`, `"gid":65532`, "cannot find a cluster"} {
		if !strings.Contains(errOut, want) {
			return fmt.Errorf("podman run %s: the log lacks %s:\n%s", o.ref, want, errOut)
		}
	}
	fmt.Fprintf(os.Stderr, "image: podman run %s: started as uid 65532 gid 65532, exited 1 without a cluster, as it should\n", o.ref)
	return nil
}
