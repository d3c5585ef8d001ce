# Install the operator that cordons and drains the nodes, then put a node into
# maintenance once it runs. Destroy removes the maintenance first (the node is
# restored), then the operator.
resource "nodemaintenance_operator" "this" {
  namespace       = "node-maintenance-operator"
  replicas        = 2
  max_unavailable = "20%"
  # Maintenances beyond the limit wait for a slot, first come first served
  # (the default); "Refuse" has the webhook refuse them instead.
  max_unavailable_policy = "Queue"
  extra_args             = ["--lease-duration=30m"]

  timeouts {
    create = "5m"
  }
}

resource "nodemaintenance" "node02" {
  node_name = "node02"
  reason    = "firmware update"

  depends_on = [nodemaintenance_operator.this]
}
