# Drain node02 before the change of the resource that needs it empty (a
# firmware or kernel update, here a stand-in), and give it back after.
# Terraform 1.14 or later; OpenTofu has no actions yet.
action "nodemaintenance_drain" "node02" {
  config {
    node_name = "node02"
    reason    = "firmware update"
    timeout   = "30m"

    drain = {
      timeout    = "20m"
      on_timeout = "Fail"
    }
  }
}

action "nodemaintenance_restore" "node02" {
  config {
    node_name = "node02"
  }
}

resource "terraform_data" "firmware" {
  input = "2.4.1" # the change that needs node02 drained

  lifecycle {
    action_trigger {
      events  = [before_update]
      actions = [action.nodemaintenance_drain.node02]
    }
    action_trigger {
      events  = [after_update]
      actions = [action.nodemaintenance_restore.node02]
    }
  }
}
