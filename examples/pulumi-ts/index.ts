// Puts one node into maintenance with the generated TypeScript SDK: `pulumi up`
// returns once the node is drained (phase "Succeeded"), `pulumi destroy` once
// it is restored as it was.
import * as pulumi from "@pulumi/pulumi";
import * as nodemaintenance from "@nodemaintenance/nodemaintenance";

const config = new pulumi.Config();
const nodeName = config.get("nodeName") ?? "node02";

const maintenance = new nodemaintenance.NodeMaintenance("node", {
    nodeName,
    reason: config.get("reason") ?? "kernel upgrade",
    // Pulumi's customTimeouts option does not reach a bridged provider: the
    // limits are this property, as in the Terraform timeouts block.
    timeouts: { create: "30m", delete: "10m" },
});

// Every maintenance of the cluster that has not finished draining, read after
// this one is done: a gate for the next step of a pipeline.
const unfinished = maintenance.phase.apply(() =>
    nodemaintenance.getNodeMaintenanceListOutput({ phase: "Running" }));

export const name = maintenance.name;
export const phase = maintenance.phase;
export const pendingPods = maintenance.pendingPods;
export const stillDraining: pulumi.Output<string[]> = unfinished.apply(list => list.names);

// With `pool` set, the nodes labelled pool=<pool> are patched as well, two at
// a time, by a rollout: each is drained, the step Job runs on it (the operator
// pins its pod to the node and lets it tolerate the maintenance taints), then
// it is restored and must stay Ready for a minute before the next one starts.
const pool = config.get("pool");
const rollout = pool === undefined ? undefined : new nodemaintenance.Rollout("pool", {
    name: `patch-${pool}`,
    nodeSelector: `pool=${pool}`,
    maxUnavailable: "2",
    soakFor: "1m",
    step: {
        namespace: config.get("stepNamespace") ?? "default",
        timeout: "15m",
        jobTemplate: JSON.stringify({
            spec: {
                backoffLimit: 0,
                template: {
                    spec: {
                        restartPolicy: "Never",
                        containers: [{ name: "check", image: "busybox:1.37", command: ["sh", "-c", "uname -r"] }],
                    },
                },
            },
        }),
    },
    // Nodes start only at night, Berlin time; a restored node gives its slot
    // away once the workloads evicted from it are back (at most 20 minutes).
    window: { days: ["Mon", "Tue", "Wed", "Thu", "Fri"], start: "22:00", end: "04:00", timeZone: "Europe/Berlin" },
    recoveryTimeout: "20m",
    // All three, or none: the bridge fails a create that leaves one of a
    // resource's timeouts unset (see examples/pulumi-go/README.md).
    timeouts: { create: "2h", update: "2h", delete: "30m" },
});

export const rolloutPhase = rollout?.phase;
export const rolloutDone = rollout ? pulumi.interpolate`${rollout.done}/${rollout.total}` : undefined;
