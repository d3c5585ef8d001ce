# An installation is imported by its namespace.
terraform import nodemaintenance_operator.this node-maintenance-operator
