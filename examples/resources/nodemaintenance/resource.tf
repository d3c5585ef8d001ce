# Cordon and drain node02. `apply` returns once the operator reports the
# maintenance Succeeded; `destroy` returns once node02 is back as it was.
resource "nodemaintenance" "node02" {
  node_name = "node02"
  reason    = "硬體更換 - RAM 升級"

  timeouts {
    create = "30m"
    delete = "10m"
  }
}

output "node02_phase" {
  value = nodemaintenance.node02.phase # "Succeeded" after a successful apply
}
