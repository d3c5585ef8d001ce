# CI gate: `plan` (and `apply`) fail unless at least one NodeMaintenance
# exists and every one of them has Succeeded.
data "nodemaintenance_list" "all" {}

locals {
  not_succeeded = [
    for m in data.nodemaintenance_list.all.items :
    "${m.name} (node ${m.node_name}): ${m.phase == "" ? "not picked up yet" : m.phase}, ${m.drain_progress}% drained"
    if m.phase != "Succeeded"
  ]
}

output "all_succeeded" {
  value = data.nodemaintenance_list.all.all_succeeded

  precondition {
    condition     = data.nodemaintenance_list.all.all_succeeded
    error_message = length(data.nodemaintenance_list.all.names) == 0 ? "There is no NodeMaintenance in the cluster." : "Not every NodeMaintenance has succeeded: ${join("; ", local.not_succeeded)}."
  }
}

output "maintenances" {
  value = data.nodemaintenance_list.all.names
}

# A check block reports a problem as a warning only: plan and apply still
# succeed. Use it for things to look at, and the precondition above to gate.
check "no_failed_maintenance" {
  data "nodemaintenance_list" "failed" {
    phase = "Failed"
  }

  assert {
    condition     = length(data.nodemaintenance_list.failed.names) == 0
    error_message = "Failed NodeMaintenances: ${join(", ", data.nodemaintenance_list.failed.names)}. Destroy them to restore their nodes."
  }
}
