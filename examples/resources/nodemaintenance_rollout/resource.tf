# Maintain the node pool "blue" two nodes at a time. Each node is cordoned
# and drained, the step Job runs on it, then it is restored and must stay
# Ready for 5 minutes before its slot goes to the next node. `apply` returns
# once every node is done; `destroy` restores any node still held.
resource "nodemaintenance_rollout" "pool_blue" {
  name            = "patch-pool-blue"
  node_selector   = "pool=blue"
  max_unavailable = "2"
  soak_for        = "5m"
  reason          = "kernel 6.12"

  drain = {
    timeout    = "30m"
    on_timeout = "Fail" # a node whose drain times out halts the rollout
  }

  step = {
    namespace = "node-ops"
    timeout   = "15m"
    job_template = yamlencode({
      spec = {
        backoffLimit = 0
        template = {
          spec = {
            restartPolicy = "Never"
            containers = [{
              name    = "check"
              image   = "busybox:1.37"
              command = ["sh", "-c", "echo \"node $NODE_NAME runs kernel $(uname -r)\""]
              env = [{
                name      = "NODE_NAME"
                valueFrom = { fieldRef = { fieldPath = "spec.nodeName" } }
              }]
            }]
          }
        }
      }
    })
  }

  timeouts {
    create = "4h"
  }
}

output "pool_blue_done" {
  value = "${nodemaintenance_rollout.pool_blue.done}/${nodemaintenance_rollout.pool_blue.total} nodes"
}
