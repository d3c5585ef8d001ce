package main

import (
	"errors"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/nodemaintenance/terraform-provider-nodemaintenance/pulumi/sdk/go/nodemaintenance"
)

// Rollout is the maintenance of a set of nodes as a Pulumi program: one
// Rollout resource, through which the operator drains MaxUnavailable nodes
// at a time, runs Step on each drained node, restores it, lets it soak and
// moves on. The stack exports the rollout's name, phase and counts.
type Rollout struct {
	// Name is the NodeMaintenanceRollout's name.
	Name string
	// Nodes (in this order) or the nodes Selector picks ("pool=blue"):
	// exactly one of the two.
	Nodes    []string
	Selector string
	// MaxUnavailable is how many nodes of the set may be out of service at
	// once: "2" or "30%"; empty: 1.
	MaxUnavailable string
	// SoakFor is how long a restored node must stay Ready before its slot
	// goes to the next node ("1m"; empty: at once).
	SoakFor string
	Reason  string
	// Step is run on each node while it is drained; nil: each node is
	// restored as soon as it is drained.
	Step *Step
	// RecoveryTimeout bounds how long a restored node waits for the
	// workloads evicted from it to be available again ("20m"; empty: 10m).
	RecoveryTimeout string
	// Window, when set, is when nodes may start.
	Window *Window
	// AlertGate, when set, holds the next node while its query returns any
	// series (a firing alert) or Prometheus cannot be reached.
	AlertGate *AlertGate
	// NotifyURL, when set, receives a CloudEvent for each of the rollout's
	// transitions.
	NotifyURL string
	// Create bounds the rollout, Update a change to it (a pause, a resume)
	// and Delete the restore of the nodes it holds ("2h"). Set all three or
	// none (the provider's defaults): see Program.
	Create, Update, Delete string
}

// Window is a maintenance window: Days ("Sat", "sunday"), Start and End
// ("22:00", "04:00"), in TimeZone (an IANA zone; empty: UTC).
type Window struct {
	Days                 []string
	Start, End, TimeZone string
}

// AlertGate is a Prometheus server (its base URL) and a PromQL query.
type AlertGate struct {
	URL, Query string
}

// Step is a Job run on each drained node.
type Step struct {
	// Namespace is where the Jobs are created; whoever runs the program must
	// be allowed to create Jobs there.
	Namespace string
	// JobTemplate is a batch/v1 JobTemplateSpec in YAML or JSON, as in
	// step-job.yaml.
	JobTemplate string
	// Timeout bounds the step on one node ("15m"; empty: the provider's
	// default).
	Timeout string
}

// Program is the inline Pulumi program of r.
func (r Rollout) Program(ctx *pulumi.Context) error {
	args := &nodemaintenance.RolloutArgs{
		Name:           pulumi.String(r.Name),
		NodeSelector:   pulumi.StringPtrFromPtr(nonEmpty(r.Selector)),
		MaxUnavailable: pulumi.StringPtrFromPtr(nonEmpty(r.MaxUnavailable)),
		SoakFor:        pulumi.StringPtrFromPtr(nonEmpty(r.SoakFor)),
		Reason:         pulumi.StringPtrFromPtr(nonEmpty(r.Reason)),
	}
	if len(r.Nodes) > 0 {
		args.NodeNames = pulumi.ToStringArray(r.Nodes)
	}
	if r.Step != nil {
		args.Step = &nodemaintenance.RolloutStepArgs{
			Namespace:   pulumi.String(r.Step.Namespace),
			JobTemplate: pulumi.String(r.Step.JobTemplate),
			Timeout:     pulumi.StringPtrFromPtr(nonEmpty(r.Step.Timeout)),
		}
	}
	r.safety(args)
	// The bridge (pulumi-terraform-bridge v3.120.0) fails the create of a
	// resource whose timeouts leave one of them unset, after the rollout has
	// run ("recovered raw state does not byte-for-byte match the original
	// raw state"): it drops the unset one from the state it checks. So
	// either every timeout is given, or none.
	switch {
	case r.Create != "" && r.Update != "" && r.Delete != "":
		args.Timeouts = &nodemaintenance.RolloutTimeoutsArgs{
			Create: pulumi.String(r.Create),
			Update: pulumi.String(r.Update),
			Delete: pulumi.String(r.Delete),
		}
	case r.Create != "" || r.Update != "" || r.Delete != "":
		return errors.New("rollout timeouts: give create, update and delete, or none of them")
	}
	// Up returns once the rollout has Succeeded; a Halted rollout fails the
	// update with the failed nodes and why.
	rollout, err := nodemaintenance.NewRollout(ctx, "rollout", args)
	if err != nil {
		return err
	}
	ctx.Export("name", rollout.Name)
	ctx.Export("phase", rollout.Phase)
	ctx.Export("done", rollout.Done)
	ctx.Export("total", rollout.Total)
	ctx.Export("failed", rollout.Failed)
	return nil
}

// safety sets the rollout's recovery timeout, window, alert gate and
// notification.
func (r Rollout) safety(args *nodemaintenance.RolloutArgs) {
	args.RecoveryTimeout = pulumi.StringPtrFromPtr(nonEmpty(r.RecoveryTimeout))
	if w := r.Window; w != nil {
		args.Window = &nodemaintenance.RolloutWindowArgs{Days: pulumi.ToStringArray(w.Days), Start: pulumi.String(w.Start),
			End: pulumi.String(w.End), TimeZone: pulumi.StringPtrFromPtr(nonEmpty(w.TimeZone))}
	}
	if g := r.AlertGate; g != nil {
		args.Gates = &nodemaintenance.RolloutGatesArgs{Prometheus: &nodemaintenance.RolloutGatesPrometheusArgs{
			Url: pulumi.String(g.URL), Query: pulumi.String(g.Query)}}
	}
	if r.NotifyURL != "" {
		args.Notify = nodemaintenance.RolloutNotifyArray{&nodemaintenance.RolloutNotifyArgs{Url: pulumi.String(r.NotifyURL)}}
	}
}
