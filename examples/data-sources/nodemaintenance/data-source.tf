# Read a maintenance that another configuration (or kubectl) owns.
data "nodemaintenance" "node02" {
  name = "maintain-node02"
}

output "node02_phase" {
  value = data.nodemaintenance.node02.phase
}

output "node02_drain_progress" {
  value = data.nodemaintenance.node02.drain_progress
}

# Gate on it: `plan` fails unless node02 has been drained.
output "node02_drained" {
  value = data.nodemaintenance.node02.phase == "Succeeded"

  precondition {
    condition     = data.nodemaintenance.node02.phase == "Succeeded"
    error_message = "node02 is not drained yet: phase \"${data.nodemaintenance.node02.phase}\", ${data.nodemaintenance.node02.drain_progress}% drained, last error: \"${data.nodemaintenance.node02.last_error}\"."
  }
}
