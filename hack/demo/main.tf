# The demo configuration of `make demo`: put node02 into maintenance.
terraform {
  required_providers {
    nodemaintenance = {
      source = "registry.terraform.io/nodemaintenance/nodemaintenance"
    }
  }
}

variable "kubeconfig" {
  type        = string
  description = "Path to the kubeconfig of the cluster."
}

provider "nodemaintenance" {
  config_path = var.kubeconfig
}

resource "nodemaintenance" "node02" {
  node_name = "node02"
  reason    = "硬體更換 - RAM 升級"

  timeouts {
    create = "5m"
    delete = "5m"
  }
}

output "phase" {
  value = nodemaintenance.node02.phase
}

output "evicted_pods" {
  value = nodemaintenance.node02.eviction_pods
}
