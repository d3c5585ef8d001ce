terraform {
  required_providers {
    nodemaintenance = {
      source = "nodemaintenance/nodemaintenance"
    }
  }
}

# Point the provider at a kubeconfig file. "~/" is expanded.
provider "nodemaintenance" {
  config_path    = "~/.kube/config"
  config_context = "production"
}

# Alternatively, leave the block empty and configure access in the environment,
# with the same variables as the hashicorp/kubernetes provider:
#
#   provider "nodemaintenance" {}
#
#   export KUBE_CONFIG_PATH=~/.kube/config      # or KUBECONFIG=~/.kube/config
#   export KUBE_CTX=production
#
# or, without any kubeconfig file:
#
#   export KUBE_HOST=https://api.production.example.com:6443
#   export KUBE_CLUSTER_CA_CERT_DATA="$(cat ca.crt)"
#   export KUBE_TOKEN="$(cat token)"
