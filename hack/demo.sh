#!/usr/bin/env bash
# The main job on a fresh machine: build what is missing, start a local cluster,
# and show a NodeMaintenance for node02 through the real API server.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
export NAME=${NAME:-nodemaintenance-demo}
export KUBECONFIG_OUT=$root/.local/demo-kubeconfig
BIN=$("$here/tools.sh" --dir)
kubectl() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_OUT" "$@"; }
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

"$here/tools.sh"
trap '"$here/cluster.sh" down >/dev/null 2>&1 || true' EXIT
step "Starting a local cluster with three fake nodes"
NODES=3 "$here/cluster.sh" up
step "Installing the NodeMaintenance CRD"
kubectl apply -f "$root/config/crd/bases/"
kubectl wait --for=condition=Established crd/nodemaintenances.nodemaintenance.medik8s.io --timeout=1m
step "Creating the seed example for node02"
kubectl apply -f - <<'YAML'
apiVersion: nodemaintenance.medik8s.io/v1beta1
kind: NodeMaintenance
metadata:
  name: maintain-node02
spec:
  nodeName: node02
  reason: "硬體更換 - RAM 升級"
YAML
kubectl get nm -o wide
step "Deleting it and tearing the cluster down"
kubectl delete nm maintain-node02
