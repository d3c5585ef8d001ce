// Put Kubernetes nodes into maintenance declaratively: cordon, taint and drain through the NodeMaintenance custom resource.
package nodemaintenance
