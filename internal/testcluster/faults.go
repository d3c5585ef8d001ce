package testcluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// auditPolicy records, once each when the response is sent, every eviction,
// every write of a NodeMaintenance (the order of a provider's actions) and
// every request made by a ServiceAccount (the operator's, when it runs with
// its installed token). Everything else, nodes' heartbeats included, is left
// out to keep the log small.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted", "Panic"]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: ["pods/eviction"]
- level: Metadata
  verbs: ["create", "update", "patch", "delete"]
  resources:
  - group: "nodemaintenance.medik8s.io"
    resources: ["nodemaintenances"]
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
`

// TracePolicy records every request once, when its response is sent,
// except the nodes' heartbeats, events and non-resource URLs (health
// checks): the API traffic of a drain, in order, with each request's
// latency as the API server saw it.
const TracePolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted", "Panic"]
rules:
- level: None
  namespaces: ["kube-node-lease"]
- level: None
  resources:
  - group: ""
    resources: ["events"]
  - group: "events.k8s.io"
    resources: ["events"]
- level: None
  nonResourceURLs: ["*"]
- level: Metadata
`

// AuditEvent is one entry of the API server's audit log, the fields tests
// read.
type AuditEvent struct {
	Verb string `json:"verb"`
	// RequestURI is the request's path and query (a list's limit and
	// resourceVersion say whether it was a consistent read).
	RequestURI string `json:"requestURI"`
	UserAgent  string `json:"userAgent"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	// StageTimestamp is when the response was sent (the only stage logged).
	StageTimestamp time.Time `json:"stageTimestamp"`
	// Annotations hold, among others, the API server's latency breakdown
	// (apiserver.latency.k8s.io/...) of slow requests.
	Annotations map[string]string `json:"annotations"`
}

// Evictions reads the audit log of a cluster started with Options.Audit for
// the evictions of the pods of ns: when each pod's accepted evictions were
// asked for, and how many evictions were refused (by a PodDisruptionBudget,
// or a pod already gone) or cut off (EvictionLog.TimedOut).
func (c *Cluster) Evictions(ctx context.Context, ns string) (accepted map[string][]time.Time, refused int, err error) {
	log, err := c.EvictionLog(ctx, ns)
	return log.Accepted, log.Refused, err
}

// EvictionLog is what the audit log says of the evictions of one
// namespace's pods.
type EvictionLog struct {
	// Accepted holds, for each pod, when its accepted evictions were asked
	// for.
	Accepted map[string][]time.Time
	// TimedOut holds, for each pod, when its evictions answered 504 Gateway
	// Timeout were asked for: their client went away (it was killed) or ran
	// out of time before the answer. kube-apiserver answers such a request
	// at once and lets its handler run on, so the pod may have been evicted
	// all the same.
	TimedOut map[string][]time.Time
	// Refused counts the evictions not accepted, the timed-out ones
	// included.
	Refused int
}

// EvictionLog reads the audit log of a cluster started with Options.Audit
// for the evictions of the pods of ns.
func (c *Cluster) EvictionLog(ctx context.Context, ns string) (EvictionLog, error) {
	events, err := c.AuditEvents(ctx)
	if err != nil {
		return EvictionLog{}, err
	}
	log := EvictionLog{Accepted: map[string][]time.Time{}, TimedOut: map[string][]time.Time{}}
	for _, e := range events {
		r := e.ObjectRef
		if e.Verb != "create" || r.Resource != "pods" || r.Subresource != "eviction" || r.Namespace != ns {
			continue
		}
		switch code := e.ResponseStatus.Code; {
		case code >= 200 && code < 300:
			log.Accepted[r.Name] = append(log.Accepted[r.Name], e.RequestReceivedTimestamp)
		case code == http.StatusGatewayTimeout:
			log.TimedOut[r.Name] = append(log.TimedOut[r.Name], e.RequestReceivedTimestamp)
			log.Refused++
		default:
			log.Refused++
		}
	}
	return log, nil
}

// AuditEvents returns the audit log so far of a cluster started with
// Options.Audit.
func (c *Cluster) AuditEvents(ctx context.Context) ([]AuditEvent, error) {
	out, err := c.kwokctl(ctx, "logs", "audit", "--name", c.Name)
	if err != nil {
		return nil, err
	}
	var events []AuditEvent
	s := bufio.NewScanner(bytes.NewReader(out))
	s.Buffer(make([]byte, 1<<20), 1<<24)
	for s.Scan() {
		if len(bytes.TrimSpace(s.Bytes())) == 0 {
			continue
		}
		var e AuditEvent
		if err := json.Unmarshal(s.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("audit log of cluster %s: %w: %q", c.Name, err, s.Text())
		}
		events = append(events, e)
	}
	return events, s.Err()
}

// RestartAPIServer stops the cluster's kube-apiserver (SIGTERM, then SIGKILL
// once grace has passed: with open watches it otherwise drains for a minute),
// starts it again with the same command line, and returns once it is ready
// and the controller manager and scheduler lead again. Those two exit when
// they cannot renew their leader lease during the outage; they are started
// again the same way.
//
// kwokctl's stop and start are not used: a component that exited stays a
// zombie until the machine's init reaps it, and kwokctl takes it for running.
func (c *Cluster) RestartAPIServer(ctx context.Context, grace time.Duration) (*Restart, error) {
	r := &Restart{}
	procs := map[string]*component{}
	for _, name := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		p, err := c.component(name)
		if err != nil {
			return nil, err
		}
		procs[name] = p
	}
	apiserver := procs["kube-apiserver"]
	down := time.Now()
	if err := apiserver.stop(grace); err != nil {
		return nil, err
	}
	if err := apiserver.start(); err != nil {
		return nil, err
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		body, err := c.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
	if err != nil {
		return nil, fmt.Errorf("cluster %s: kube-apiserver not ready after its restart (log %s): %w", c.Name, apiserver.log, err)
	}
	r.Outage = time.Since(down)
	up := metav1.NowMicro()
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		p := procs[name]
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			if !alive(p.pid) {
				if err := p.start(); err != nil {
					return false, err
				}
				r.Restarted = append(r.Restarted, name)
			}
			l, err := c.Clientset.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
			return err == nil && l.Spec.RenewTime != nil && !l.Spec.RenewTime.Before(&up), nil
		})
		if err != nil {
			return r, fmt.Errorf("cluster %s: %s does not lead again after the API server restart (log %s): %w", c.Name, name, p.log, err)
		}
	}
	return r, nil
}

// Restart is what RestartAPIServer did.
type Restart struct {
	// Outage is how long the API server did not answer.
	Outage time.Duration
	// Restarted names the other components that exited during the outage
	// and were started again.
	Restarted []string
}

// component is one control plane process as kwokctl started it.
type component struct {
	name, pidFile, log, dir string
	argv, env               []string
	pid                     int
}

// component reads the command line, environment and directory of a running
// component from /proc, so that it can be started again exactly.
func (c *Cluster) component(name string) (*component, error) {
	root := filepath.Join(c.workDir, "kwok", "clusters", c.Name)
	p := &component{name: name, pidFile: filepath.Join(root, "pids", name+".pid"), log: filepath.Join(root, "logs", name+".log")}
	b, err := os.ReadFile(p.pidFile)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %s: %w", c.Name, name, err)
	}
	if p.pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
		return nil, fmt.Errorf("cluster %s: pid file %s: %w", c.Name, p.pidFile, err)
	}
	proc := filepath.Join("/proc", strconv.Itoa(p.pid))
	cmdline, err := os.ReadFile(filepath.Join(proc, "cmdline"))
	if err == nil && len(cmdline) == 0 {
		err = errors.New("no command line: not running")
	}
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %s (pid %d): %w", c.Name, name, p.pid, err)
	}
	p.argv = strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	environ, err := os.ReadFile(filepath.Join(proc, "environ"))
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %s (pid %d): %w", c.Name, name, p.pid, err)
	}
	p.env = strings.Split(strings.TrimRight(string(environ), "\x00"), "\x00")
	if p.dir, err = os.Readlink(filepath.Join(proc, "cwd")); err != nil {
		return nil, fmt.Errorf("cluster %s: %s (pid %d): %w", c.Name, name, p.pid, err)
	}
	return p, nil
}

// stop sends SIGTERM, then SIGKILL after grace, and waits until the process
// has exited (a zombie counts as exited).
func (p *component) stop(grace time.Duration) error {
	_ = syscall.Kill(p.pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for alive(p.pid) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if alive(p.pid) {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	for i := 0; alive(p.pid); i++ {
		if i == 600 {
			return fmt.Errorf("%s (pid %d) did not exit within 30s of SIGKILL", p.name, p.pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// start runs the component again, detached, its output appended to its log,
// and records its pid where kwokctl (delete cluster) looks for it.
func (p *component) start() error {
	log, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Dir, cmd.Env = p.dir, p.env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s again: %w", p.name, err)
	}
	go func() { _ = cmd.Wait(); log.Close() }() // reap it: it is our child now
	p.pid = cmd.Process.Pid
	return os.WriteFile(p.pidFile, []byte(strconv.Itoa(p.pid)), 0o644)
}

// alive reports whether pid is a process that has not exited.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may
	// itself contain them.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	state := stat[i+2]
	return state != 'Z' && state != 'X'
}
