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

variable "operator_image" {
  description = "Operator image; null keeps the provider's default (what `make image` tags)."
  type        = string
  default     = null
}

variable "operator_replicas" {
  description = "Operator replicas; 0 when the operator runs outside the cluster (see webhook_url)."
  type        = number
  default     = 1
}

variable "webhook_url" {
  description = "For an operator that runs outside the cluster: the URL the API server sends the validating webhook to. Null: the in-cluster Service."
  type        = string
  default     = null
}

variable "webhook_ca_bundle" {
  description = "PEM CA of the certificate served at webhook_url (required with it)."
  type        = string
  default     = null
}

variable "max_unavailable" {
  description = "Most nodes in maintenance at once (count or percentage). The nodes beyond it wait for a slot (max_unavailable_policy Queue), and their drain_timeout counts that wait."
  type        = string
  default     = null
}

variable "max_unavailable_policy" {
  description = "Queue (the default: maintenances beyond max_unavailable wait for a slot, first come first served) or Refuse (the operator's webhook refuses them)."
  type        = string
  default     = null
}

variable "drain_timeout" {
  description = "How long one node may take to drain."
  type        = string
  default     = "30m"
}

resource "nodemaintenance_operator" "this" {
  namespace              = var.operator_namespace
  image                  = var.operator_image
  replicas               = var.operator_replicas
  max_unavailable        = var.max_unavailable
  max_unavailable_policy = var.max_unavailable_policy
  webhook_url            = var.webhook_url
  webhook_ca_bundle      = var.webhook_ca_bundle
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

output "operator_namespace" {
  description = "Namespace of the installed operator (its ServiceAccount is node-maintenance-operator)."
  value       = nodemaintenance_operator.this.id
}

output "all_succeeded" {
  description = "True when at least one node is listed and every listed node is drained (phase Succeeded). No nodes is not success, as for the nodemaintenance_list data source's all_succeeded."
  value       = length(nodemaintenance.node) > 0 && alltrue([for m in nodemaintenance.node : m.phase == "Succeeded"])
}
