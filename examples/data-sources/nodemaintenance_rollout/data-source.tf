# Read a rollout that another configuration (or kubectl) owns, or one created
# with wait_for_completion = false by an earlier pipeline stage.
data "nodemaintenance_rollout" "pool_blue" {
  name = "patch-pool-blue"
}

# Gate on it: `plan` fails unless every node of the pool was maintained.
output "pool_blue_patched" {
  value = data.nodemaintenance_rollout.pool_blue.phase == "Succeeded"

  precondition {
    condition     = data.nodemaintenance_rollout.pool_blue.phase == "Succeeded" && data.nodemaintenance_rollout.pool_blue.failed == 0
    error_message = "rollout patch-pool-blue is ${data.nodemaintenance_rollout.pool_blue.phase}: ${data.nodemaintenance_rollout.pool_blue.done} of ${data.nodemaintenance_rollout.pool_blue.total} nodes done, ${data.nodemaintenance_rollout.pool_blue.failed} failed. ${data.nodemaintenance_rollout.pool_blue.message}"
  }
}

# While a window holds it: when the next node may start, and what holds it.
output "pool_blue_next_window" {
  value = data.nodemaintenance_rollout.pool_blue.next_window_start
}

output "pool_blue_blockers" {
  value = data.nodemaintenance_rollout.pool_blue.blockers
}
