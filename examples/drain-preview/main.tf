# CI gate before a maintenance: `plan` fails when a drain of the node started
# now would wait (a PodDisruptionBudget that allows no disruption, a pod under
# two budgets), and shows the other risks (outages, pods deleted for good,
# emptyDir data, no room elsewhere) as warnings. Nothing is changed: the data
# source only reads the cluster. Run it with
#   tofu plan -var node_name=node02
terraform {
  required_providers {
    nodemaintenance = {
      source = "nodemaintenance/nodemaintenance"
    }
  }
}

variable "node_name" {
  type        = string
  description = "The node to put into maintenance."
}

data "nodemaintenance_drain_preview" "this" {
  node_name = var.node_name
}

output "evicted_pods" {
  value = data.nodemaintenance_drain_preview.this.evict

  precondition {
    condition     = !data.nodemaintenance_drain_preview.this.blocked
    error_message = "A drain of node ${var.node_name} would wait: ${join("; ", data.nodemaintenance_drain_preview.this.blockers)}."
  }
}

output "summary" {
  value = data.nodemaintenance_drain_preview.this.summary
}

# A check block only warns: look at these, the precondition above gates.
check "drain_risks" {
  assert {
    condition     = length(data.nodemaintenance_drain_preview.this.warnings) == 0
    error_message = join("\n", data.nodemaintenance_drain_preview.this.warnings)
  }
}
