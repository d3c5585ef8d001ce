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

  # A restored node gives its slot to the next one only when the Deployments
  # and StatefulSets it held pods of are fully available again (at most 20m).
  recovery_timeout = "20m"

  # No node starts while an alert fires, or while Prometheus cannot tell.
  gates = {
    prometheus = {
      url   = "http://prometheus.monitoring:9090"
      query = "ALERTS{alertstate=\"firing\",severity=\"critical\"}"
    }
  }

  # Nodes start only on weeknights, 22:00 to 04:00 Berlin time.
  window = {
    days      = ["Mon", "Tue", "Wed", "Thu", "Fri"]
    start     = "22:00"
    end       = "04:00"
    time_zone = "Europe/Berlin"
  }

  # The on-call hears when the rollout is blocked, halts or finishes.
  notify = [{
    url        = "https://hooks.example.com/node-maintenance"
    events     = ["Blocked", "NodeFailed", "Halted", "Succeeded"]
    secret_ref = { name = "maintenance-webhook", key = "token" }
  }]

  timeouts {
    create = "4h"
  }
}

output "pool_blue_done" {
  value = "${nodemaintenance_rollout.pool_blue.done}/${nodemaintenance_rollout.pool_blue.total} nodes"
}
