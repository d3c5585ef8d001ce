# terraform query lists the NodeMaintenances of the cluster, whoever created
# them; `terraform query -generate-config-out=maintenances.tf` writes a
# resource and an import block for each. Terraform 1.14 or later.
list "nodemaintenance" "storage" {
  provider         = nodemaintenance
  include_resource = true

  config {
    label_selector = "team=storage"
    phase          = "Succeeded"
  }
}
