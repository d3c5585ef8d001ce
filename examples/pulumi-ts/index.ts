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
