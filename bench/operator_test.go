package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testcluster"
	"github.com/nodemaintenance/terraform-provider-nodemaintenance/internal/testoperator"
)

// operatorProcess is the operator binary run as a process of its own, so
// that its memory, CPU and API requests are its own.
type operatorProcess struct{ *testoperator.Process }

func startOperator(c *testcluster.Cluster) (*operatorProcess, error) {
	p, err := testoperator.BuildProcess()
	if err != nil {
		return nil, err
	}
	o := &operatorProcess{p}
	return o, o.start(c)
}

// start runs the operator with the benchmark's usual flags and extra.
func (o *operatorProcess) start(c *testcluster.Cluster, extra ...string) error {
	return o.Start(c, extra...)
}

// restart stops the operator and starts a fresh process with extra flags:
// what it then holds and has used is its own since that start.
func (o *operatorProcess) restart(c *testcluster.Cluster, extra ...string) error {
	o.stop()
	return o.start(c, extra...)
}

func (o *operatorProcess) stop() {
	if o != nil {
		o.Stop()
	}
}

// saveProfile writes the operator's profile (heap, profile?seconds=5, ...)
// to path, for the figures that need one.
func (o *operatorProcess) saveProfile(name, path string) error {
	resp, err := http.Get(o.PprofURL + "/" + name)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof %s: %s", name, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// rssMB is the resident memory of the process (VmRSS).
func (o *operatorProcess) rssMB() (float64, error) { return o.statusMB("VmRSS") }

// peakRSSMB is the largest the resident memory has been (VmHWM): what a
// container memory limit must allow.
func (o *operatorProcess) peakRSSMB() (float64, error) { return o.statusMB("VmHWM") }

// statusMB reads one kB field of /proc/PID/status, in MB.
func (o *operatorProcess) statusMB(field string) (float64, error) {
	return processStatusMB(o.Pid(), field)
}

// processStatusMB reads one kB field (VmRSS, VmHWM) of /proc/PID/status, in MB.
func processStatusMB(pid int, field string) (float64, error) {
	mb, err := procKBFieldsMB(fmt.Sprintf("/proc/%d/status", pid), field)
	if err != nil {
		return 0, err
	}
	return mb[0], nil
}

// procKBFieldsMB reads the "Name:   N kB" lines named fields of a /proc
// file (status, meminfo), in MB, in the order asked; a field the file does
// not have is an error.
func procKBFieldsMB(path string, fields ...string) ([]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	found := map[string]float64{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, rest, ok := strings.Cut(s.Text(), ":")
		if !ok || !slices.Contains(fields, name) {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, name, err)
		}
		found[name] = kb / 1024
	}
	out := make([]float64, len(fields))
	for i, name := range fields {
		v, ok := found[name]
		if !ok {
			return nil, fmt.Errorf("%s has no %s", path, name)
		}
		out[i] = v
	}
	return out, s.Err()
}

// idle waits settle after a start (the initial lists), then measures the
// CPU the process uses over window, in cores, and its resident memory
// at the end of it, in MB.
func (o *operatorProcess) idle(settle, window time.Duration) (cores, rssMB float64, err error) {
	time.Sleep(settle)
	before, err := o.cpuSeconds()
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	time.Sleep(window)
	after, err := o.cpuSeconds()
	if err != nil {
		return 0, 0, err
	}
	cores = (after - before) / time.Since(start).Seconds()
	rssMB, err = o.rssMB()
	return cores, rssMB, err
}

// cpuSeconds is the CPU time the process used so far (user + system).
func (o *operatorProcess) cpuSeconds() (float64, error) { return processCPUSeconds(o.Pid()) }

// processCPUSeconds is the CPU time a process used so far (user + system).
func processCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	const clockTicks = 100 // USER_HZ on Linux
	return (utime + stime) / clockTicks, nil
}

// requests is the operator's count of API requests so far (client-go's
// rest_client_requests_total, every code, method and host).
func (o *operatorProcess) requests() (float64, error) { return o.metric("rest_client_requests_total") }

// metric sums the samples of one metric of the operator's Prometheus endpoint.
func (o *operatorProcess) metric(name string) (float64, error) { return o.metricWith(name, "") }

// reconciles is how many passes the controller named has run so far, and
// the seconds they took in all (controller-runtime's histogram, which has
// no sample before the first pass: none yet).
func (o *operatorProcess) reconciles(controller string) (passes, seconds float64, err error) {
	return o.histogram("controller_runtime_reconcile_time_seconds", fmt.Sprintf(`controller="%s"`, controller))
}

// histogram is the count and the sum of the samples of one histogram of the
// operator's Prometheus endpoint whose labels contain label; a histogram
// with no sample yet (which the endpoint does not list) is 0 and 0.
func (o *operatorProcess) histogram(name, label string) (count, sum float64, err error) {
	if count, err = o.metricWith(name+"_count", label); errors.Is(err, errNoMetric) {
		return 0, 0, nil
	} else if err != nil {
		return 0, 0, err
	}
	sum, err = o.metricWith(name+"_sum", label)
	return count, sum, err
}

// errNoMetric is metricWith's error for a metric the endpoint has no
// sample of.
var errNoMetric = errors.New("no such metric")

// metricWith sums the samples of one metric of the operator's Prometheus
// endpoint whose labels contain label ("" for every sample).
func (o *operatorProcess) metricWith(name, label string) (float64, error) {
	resp, err := http.Get(o.MetricsURL)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	total, found := 0.0, false
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") || !strings.Contains(line, label) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("metrics line %q: %w", line, err)
		}
		total, found = total+v, true
	}
	if !found {
		return 0, fmt.Errorf("%w: %s at %s", errNoMetric, name, o.MetricsURL)
	}
	return total, nil
}
