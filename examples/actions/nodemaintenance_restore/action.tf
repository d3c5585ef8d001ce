# Give node02 back: delete its NodeMaintenance (maintain-node02) and wait until
# the operator has restored the node. Also on its own, from the command line:
#   terraform apply -invoke=action.nodemaintenance_restore.node02
action "nodemaintenance_restore" "node02" {
  config {
    node_name = "node02"
    timeout   = "10m"
  }
}
