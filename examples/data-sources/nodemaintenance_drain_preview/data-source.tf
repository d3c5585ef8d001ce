# What a drain of node02 would do now, under the same policy as the
# maintenance that will drain it.
data "nodemaintenance_drain_preview" "node02" {
  node_name = "node02"
  drain = {
    pod_selector = "tier!=system"
  }
}

output "pods_that_move" {
  value = data.nodemaintenance_drain_preview.node02.evict
}

output "drain_risks" {
  value = [for r in data.nodemaintenance_drain_preview.node02.risks : "${r.kind}: ${r.message}"]
}

# Gate on it: `plan` fails when the drain would wait on a blocker.
output "node02_can_drain" {
  value = !data.nodemaintenance_drain_preview.node02.blocked

  precondition {
    condition     = !data.nodemaintenance_drain_preview.node02.blocked
    error_message = "A drain of node02 would wait: ${join("; ", data.nodemaintenance_drain_preview.node02.blockers)}."
  }
}
