// Command pulumi-go puts a Kubernetes node into maintenance from Go, or
// patches a set of nodes with a rollout, with the generated Go SDK
// (pulumi/sdk/go) and Pulumi's Automation API: the Pulumi program is a Go
// function in this process (an inline program, so no Pulumi project directory
// and no language host), the state lives in a local directory, and the
// provider plugin is taken from a directory.
//
//	go run . -node node02 up        # returns once node02 is drained
//	go run . -node node02 refresh   # reads the maintenance back from the cluster
//	go run . -node node02 destroy   # returns once node02 is restored
//
//	# Every node labelled pool=blue, two at a time, step-job.yaml run on each:
//	go run . -rollout patch-blue -selector pool=blue -max-unavailable 2 -step step-job.yaml up
//	go run . -rollout patch-blue -selector pool=blue -max-unavailable 2 -step step-job.yaml destroy
//
// It needs the pinned Pulumi CLI (`make tools`), the bridged provider plugin
// (`make pulumi-provider`), PULUMI_CONFIG_PASSPHRASE (it encrypts the stack's
// secrets) and a cluster running the operator (KUBECONFIG, or -kubeconfig).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optdestroy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/pulumi/sdk/go/nodemaintenance"
)

// Maintenance is a node's maintenance as a Pulumi program: one
// NodeMaintenance resource, whose name and phase the stack exports.
type Maintenance struct {
	Node   string
	Reason string
	// Create and Delete bound the drain and the restore ("30m"). Set both or
	// neither (the provider's defaults): see Rollout.Program.
	Create, Delete string
}

// Program is the inline Pulumi program of m.
func (m Maintenance) Program(ctx *pulumi.Context) error {
	args := &nodemaintenance.NodeMaintenanceArgs{NodeName: pulumi.String(m.Node)}
	if m.Reason != "" {
		args.Reason = pulumi.String(m.Reason)
	}
	switch {
	case m.Create != "" && m.Delete != "":
		args.Timeouts = &nodemaintenance.NodeMaintenanceTimeoutsArgs{
			Create: pulumi.String(m.Create),
			Delete: pulumi.String(m.Delete),
		}
	case m.Create != "" || m.Delete != "":
		return errors.New("maintenance timeouts: give create and delete, or neither")
	}
	nm, err := nodemaintenance.NewNodeMaintenance(ctx, "maintenance", args)
	if err != nil {
		return err
	}
	ctx.Export("name", nm.Name)
	ctx.Export("phase", nm.Phase)
	return nil
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Workspace is where the stack runs: which CLI, state, plugin and cluster.
type Workspace struct {
	// PulumiRoot holds bin/pulumi (the CLI); empty: pulumi from PATH.
	PulumiRoot string
	// PluginDir holds pulumi-resource-nodemaintenance.
	PluginDir string
	// StateDir is the file backend's directory.
	StateDir string
	// Kubeconfig is the provider's configPath; empty: the provider's own
	// defaults (KUBECONFIG, KUBE_* variables, in-cluster).
	Kubeconfig string
	// WorkDir and PulumiHome are the workspace's directories; empty: a
	// temporary directory and ~/.pulumi.
	WorkDir, PulumiHome string
	// Env is added to the CLI's environment (for example
	// PULUMI_CONFIG_PASSPHRASE).
	Env map[string]string
}

// Stack creates or selects the stack named stackName of program (the
// Program method of a Maintenance or a Rollout) in w.
func Stack(ctx context.Context, stackName string, program pulumi.RunFunc, w Workspace) (auto.Stack, error) {
	opts := []auto.LocalWorkspaceOption{
		auto.Project(workspace.Project{
			Name:    "node-maintenance",
			Runtime: workspace.NewProjectRuntimeInfo("go", nil),
			Backend: &workspace.ProjectBackend{URL: "file://" + w.StateDir},
			// The plugin is not published yet: name its directory, so the
			// engine neither looks for it elsewhere nor downloads it.
			Plugins: &workspace.Plugins{Providers: []workspace.PluginOptions{{Name: "nodemaintenance", Path: w.PluginDir}}},
		}),
		auto.SecretsProvider("passphrase"),
		auto.EnvVars(w.Env),
	}
	if w.PulumiRoot != "" {
		cli, err := auto.NewPulumiCommand(&auto.PulumiCommandOptions{Root: w.PulumiRoot})
		if err != nil {
			return auto.Stack{}, fmt.Errorf("the Pulumi CLI in %s: %w", w.PulumiRoot, err)
		}
		opts = append(opts, auto.Pulumi(cli))
	}
	if w.WorkDir != "" {
		opts = append(opts, auto.WorkDir(w.WorkDir))
	}
	if w.PulumiHome != "" {
		opts = append(opts, auto.PulumiHome(w.PulumiHome))
	}
	if err := os.MkdirAll(w.StateDir, 0o755); err != nil {
		return auto.Stack{}, err
	}
	stack, err := auto.UpsertStackInlineSource(ctx, stackName, "node-maintenance", program, opts...)
	if err != nil {
		return auto.Stack{}, fmt.Errorf("create or select stack %s: %w", stackName, err)
	}
	if w.Kubeconfig != "" {
		if err := stack.SetConfig(ctx, "nodemaintenance:configPath", auto.ConfigValue{Value: w.Kubeconfig}); err != nil {
			return auto.Stack{}, fmt.Errorf("set nodemaintenance:configPath: %w", err)
		}
	}
	return stack, nil
}

func main() {
	var m Maintenance
	var r Rollout
	var w Workspace
	var nodes, stepFile string
	flag.StringVar(&m.Node, "node", "", "the node to put into maintenance")
	flag.StringVar(&r.Name, "rollout", "", "instead of -node: the name of a rollout over -selector or -nodes")
	flag.StringVar(&r.Selector, "selector", "", "rollout: the nodes to maintain, by label (pool=blue)")
	flag.StringVar(&nodes, "nodes", "", "rollout: the nodes to maintain, by name, in this order (node01,node02)")
	flag.StringVar(&r.MaxUnavailable, "max-unavailable", "", "rollout: how many nodes at once, a count or a percentage (default 1)")
	flag.StringVar(&r.SoakFor, "soak-for", "", "rollout: how long a restored node stays Ready before the next one starts (default 0)")
	flag.StringVar(&stepFile, "step", "", "rollout: a file with the Job template to run on each drained node (step-job.yaml)")
	stepNamespace := flag.String("step-namespace", "default", "rollout: the namespace of the step's Jobs")
	stepTimeout := flag.String("step-timeout", "", "rollout: how long the step may take on one node (default: the provider's)")
	flag.StringVar(&r.RecoveryTimeout, "recovery-timeout", "", "rollout: how long a restored node waits for its workloads (default 10m)")
	windowDays := flag.String("window-days", "", "rollout: the days nodes may start on (mon,tue); with -window-start and -window-end")
	windowStart := flag.String("window-start", "", "rollout: when the window opens, HH:MM")
	windowEnd := flag.String("window-end", "", "rollout: when the window closes, HH:MM")
	windowZone := flag.String("window-time-zone", "", "rollout: the window's IANA time zone (default UTC)")
	alertURL := flag.String("alert-url", "", "rollout: a Prometheus URL; no node starts while -alert-query returns any series")
	alertQuery := flag.String("alert-query", `ALERTS{alertstate="firing"}`, "rollout: the PromQL query of the alert gate")
	flag.StringVar(&r.NotifyURL, "notify-url", "", "rollout: a URL that receives a CloudEvent for each transition")
	flag.StringVar(&m.Reason, "reason", "", "why the nodes are in maintenance")
	flag.StringVar(&m.Create, "create-timeout", "", "how long to wait for the drain or the rollout (default: the provider's)")
	flag.StringVar(&m.Delete, "delete-timeout", "", "how long to wait for the restore (default: the provider's)")
	flag.StringVar(&r.Update, "update-timeout", "", "rollout: how long to wait for a change (default: the provider's; give all three timeouts or none)")
	flag.StringVar(&w.PulumiRoot, "pulumi-root", "", "the directory whose bin/ holds the pulumi CLI (default: pulumi from PATH)")
	flag.StringVar(&w.PluginDir, "plugin-dir", "../../bin/pulumi", "the directory of pulumi-resource-nodemaintenance (make pulumi-provider)")
	flag.StringVar(&w.StateDir, "state", "../../.local/pulumi-state", "the directory of the stack's state")
	flag.StringVar(&w.Kubeconfig, "kubeconfig", "", "the kubeconfig file (default: KUBECONFIG, KUBE_* variables, in-cluster)")
	flag.Usage = func() {
		name := filepath.Base(os.Args[0])
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s -node NODE [flags] up|refresh|destroy\n", name)
		fmt.Fprintf(flag.CommandLine.Output(), "       %s -rollout NAME -selector LABELS|-nodes N1,N2 [flags] up|refresh|destroy\n", name)
		flag.PrintDefaults()
	}
	flag.Parse()
	if (m.Node == "") == (r.Name == "") || flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stackName, program := "maintain-"+m.Node, pulumi.RunFunc(m.Program)
	if r.Name != "" {
		if nodes != "" {
			r.Nodes = strings.Split(nodes, ",")
		}
		r.Reason, r.Create, r.Delete = m.Reason, m.Create, m.Delete
		if stepFile != "" {
			template, err := os.ReadFile(stepFile)
			if err != nil {
				fmt.Fprintln(os.Stderr, "error:", err)
				os.Exit(1)
			}
			r.Step = &Step{Namespace: *stepNamespace, JobTemplate: string(template), Timeout: *stepTimeout}
		}
		if *windowDays != "" {
			r.Window = &Window{Days: strings.Split(*windowDays, ","), Start: *windowStart, End: *windowEnd, TimeZone: *windowZone}
		}
		if *alertURL != "" {
			r.AlertGate = &AlertGate{URL: *alertURL, Query: *alertQuery}
		}
		stackName, program = "rollout-"+r.Name, r.Program
	}
	if err := run(ctx, flag.Arg(0), stackName, program, w, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, op, stackName string, program pulumi.RunFunc, w Workspace, out io.Writer) error {
	for _, dir := range []*string{&w.PluginDir, &w.StateDir} {
		abs, err := filepath.Abs(*dir)
		if err != nil {
			return err
		}
		*dir = abs
	}
	stack, err := Stack(ctx, stackName, program, w)
	if err != nil {
		return err
	}
	switch op {
	case "up":
		res, err := stack.Up(ctx, optup.ProgressStreams(out))
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: %v", res.Outputs["name"].Value, res.Outputs["phase"].Value)
		if total, ok := res.Outputs["total"]; ok { // a rollout
			fmt.Fprintf(out, ", %v of %v nodes done", res.Outputs["done"].Value, total.Value)
		}
		fmt.Fprintln(out)
	case "refresh":
		_, err = stack.Refresh(ctx, optrefresh.ProgressStreams(out))
	case "destroy":
		_, err = stack.Destroy(ctx, optdestroy.ProgressStreams(out))
	default:
		err = errors.New("unknown operation " + op + ": use up, refresh or destroy")
	}
	return err
}
