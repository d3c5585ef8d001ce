// Command pulumi-go puts a Kubernetes node into maintenance from Go, with the
// generated Go SDK (pulumi/sdk/go) and Pulumi's Automation API: the Pulumi
// program is a Go function in this process (an inline program, so no Pulumi
// project directory and no language host), the state lives in a local
// directory, and the provider plugin is taken from a directory.
//
//	go run . -node node02 up        # returns once node02 is drained
//	go run . -node node02 refresh   # reads the maintenance back from the cluster
//	go run . -node node02 destroy   # returns once node02 is restored
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
	// Create and Delete bound the drain and the restore ("30m"; empty: the
	// provider's defaults).
	Create, Delete string
}

// Program is the inline Pulumi program of m.
func (m Maintenance) Program(ctx *pulumi.Context) error {
	args := &nodemaintenance.NodeMaintenanceArgs{NodeName: pulumi.String(m.Node)}
	if m.Reason != "" {
		args.Reason = pulumi.String(m.Reason)
	}
	if m.Create != "" || m.Delete != "" {
		args.Timeouts = &nodemaintenance.NodeMaintenanceTimeoutsArgs{
			Create: pulumi.StringPtrFromPtr(nonEmpty(m.Create)),
			Delete: pulumi.StringPtrFromPtr(nonEmpty(m.Delete)),
		}
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

// Stack creates or selects the stack named stackName of m in w.
func Stack(ctx context.Context, stackName string, m Maintenance, w Workspace) (auto.Stack, error) {
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
	stack, err := auto.UpsertStackInlineSource(ctx, stackName, "node-maintenance", m.Program, opts...)
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
	var w Workspace
	flag.StringVar(&m.Node, "node", "", "the node to put into maintenance (required)")
	flag.StringVar(&m.Reason, "reason", "", "why the node is in maintenance")
	flag.StringVar(&m.Create, "create-timeout", "", "how long to wait for the drain (default: the provider's)")
	flag.StringVar(&m.Delete, "delete-timeout", "", "how long to wait for the restore (default: the provider's)")
	flag.StringVar(&w.PulumiRoot, "pulumi-root", "", "the directory whose bin/ holds the pulumi CLI (default: pulumi from PATH)")
	flag.StringVar(&w.PluginDir, "plugin-dir", "../../bin/pulumi", "the directory of pulumi-resource-nodemaintenance (make pulumi-provider)")
	flag.StringVar(&w.StateDir, "state", "../../.local/pulumi-state", "the directory of the stack's state")
	flag.StringVar(&w.Kubeconfig, "kubeconfig", "", "the kubeconfig file (default: KUBECONFIG, KUBE_* variables, in-cluster)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: %s -node NODE [flags] up|refresh|destroy\n", filepath.Base(os.Args[0]))
		flag.PrintDefaults()
	}
	flag.Parse()
	if m.Node == "" || flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, flag.Arg(0), m, w, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, op string, m Maintenance, w Workspace, out io.Writer) error {
	for _, dir := range []*string{&w.PluginDir, &w.StateDir} {
		abs, err := filepath.Abs(*dir)
		if err != nil {
			return err
		}
		*dir = abs
	}
	stack, err := Stack(ctx, "maintain-"+m.Node, m, w)
	if err != nil {
		return err
	}
	switch op {
	case "up":
		res, err := stack.Up(ctx, optup.ProgressStreams(out))
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: %v\n", res.Outputs["name"].Value, res.Outputs["phase"].Value)
	case "refresh":
		_, err = stack.Refresh(ctx, optrefresh.ProgressStreams(out))
	case "destroy":
		_, err = stack.Destroy(ctx, optdestroy.ProgressStreams(out))
	default:
		err = errors.New("unknown operation " + op + ": use up, refresh or destroy")
	}
	return err
}
