# Without a kubeconfig: the API server address and its CA come from
# variables, and a credential plugin prints a short-lived token.
variable "cluster_endpoint" {
  type = string
}

variable "cluster_ca_certificate" {
  type = string
}

provider "nodemaintenance" {
  host                   = var.cluster_endpoint
  cluster_ca_certificate = var.cluster_ca_certificate

  exec {
    api_version = "client.authentication.k8s.io/v1beta1"
    command     = "aws"
    args        = ["eks", "get-token", "--cluster-name", "production"]
  }
}
