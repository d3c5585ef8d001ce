# A rollout is imported by its name (`kubectl get nmr` lists them).
terraform import nodemaintenance_rollout.pool_blue patch-pool-blue
