# A NodeMaintenance is imported by its name (`kubectl get nm` lists them).
terraform import nodemaintenance.node02 maintain-node02
