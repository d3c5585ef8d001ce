# One module that installs the node-maintenance operator and puts the given
# nodes into maintenance. `apply` drains them; `destroy` restores the nodes
# first, then removes the operator.

terraform {
  required_providers {
    nodemaintenance = {
      source = "nodemaintenance/nodemaintenance"
    }
  }
}

variable "nodes" {
  description = "Nodes to put into maintenance, with the reason for each."
  type        = map(string)
  default     = {}
}

variable "operator_namespace" {
  description = "Namespace of the operator."
  type        = string
  default     = "node-maintenance-operator"
}

variable "max_unavailable" {
  description = "Most nodes in maintenance at once (count or percentage), enforced by the operator's webhook."
  type        = string
  default     = null
}

variable "drain_timeout" {
  description = "How long one node may take to drain."
  type        = string
  default     = "30m"
}

resource "nodemaintenance_operator" "this" {
  namespace       = var.operator_namespace
  max_unavailable = var.max_unavailable
}

resource "nodemaintenance" "node" {
  for_each = var.nodes

  node_name = each.key
  reason    = each.value

  timeouts {
    create = var.drain_timeout
  }

  # Destroy restores the nodes before the operator that restores them goes.
  depends_on = [nodemaintenance_operator.this]
}

output "phases" {
  description = "Phase of each node's maintenance (Running, Succeeded or Failed), for CI gating."
  value       = { for node, m in nodemaintenance.node : node => m.phase }
}

output "all_succeeded" {
  description = "True when every listed node is drained."
  value       = alltrue([for m in nodemaintenance.node : m.phase == "Succeeded"])
}
