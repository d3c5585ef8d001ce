# The demo configuration of `make demo`: the module of
# examples/modules/node-maintenance installs the operator and puts the nodes of
# var.nodes into maintenance. The demo's operator runs on this machine (kwok
# runs pods as fakes), so the installation sends the webhook to it by URL.
terraform {
  required_providers {
    nodemaintenance = {
      source = "nodemaintenance/nodemaintenance"
    }
  }
}

variable "kubeconfig" {
  type        = string
  description = "Path to the kubeconfig of the cluster."
}

variable "nodes" {
  type        = map(string)
  description = "Nodes to put into maintenance, with the reason for each."
  default     = {}
}

variable "webhook_url" {
  type        = string
  description = "Where the operator that runs on this machine serves the webhook."
}

variable "webhook_ca_file" {
  type        = string
  description = "PEM file of the CA that signed the webhook's certificate."
}

provider "nodemaintenance" {
  config_path = var.kubeconfig
}

module "maintenance" {
  source = "./modules/node-maintenance"

  nodes             = var.nodes
  drain_timeout     = "5m"
  operator_replicas = 0
  webhook_url       = var.webhook_url
  webhook_ca_bundle = file(var.webhook_ca_file)
}

output "operator_namespace" {
  value = module.maintenance.operator_namespace
}

output "phases" {
  value = module.maintenance.phases
}

output "all_succeeded" {
  value = module.maintenance.all_succeeded
}
