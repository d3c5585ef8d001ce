#!/usr/bin/env bash
# A named local Kubernetes cluster (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok) run by `kwokctl --runtime binary` from the binaries that
# `make tools` built, with fake Ready nodes node01, node02, ...
#
#   hack/cluster.sh up     [NAME=nodemaintenance] [NODES=3] [KUBECONFIG_OUT=.local/kubeconfig]
#   hack/cluster.sh down
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
BIN=$("$here/tools.sh" --dir)
NAME=${NAME:-nodemaintenance}
NODES=${NODES:-3}
KUBECONFIG_OUT=${KUBECONFIG_OUT:-$root/.local/kubeconfig}
export KWOK_WORKDIR=${KWOK_WORKDIR:-$root/.local/kwok}

kwokctl() { "$BIN/kwokctl" "$@"; }
kubectl() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_OUT" "$@"; }

# fake_nodes N prints N Node manifests named node01... managed by kwok.
fake_nodes() {
  local i
  for i in $(seq 1 "$1"); do
    printf -v n 'node%02d' "$i"
    cat <<YAML
---
apiVersion: v1
kind: Node
metadata:
  name: $n
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    kubernetes.io/hostname: $n
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    type: kwok
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
YAML
  done
}

up() {
  "$here/tools.sh" etcd kubernetes kwok kwok-stages >/dev/null
  mkdir -p "$(dirname "$KUBECONFIG_OUT")" "$KWOK_WORKDIR"
  if kwokctl get clusters 2>/dev/null | grep -qx "$NAME"; then
    echo "cluster $NAME already exists; recreating it" >&2
    kwokctl delete cluster --name "$NAME" >/dev/null
  fi
  kwokctl --config "$BIN/kwok-stages.yaml" create cluster --name "$NAME" --runtime binary \
    --kubeconfig "$KWOK_WORKDIR/kubeconfig.merged" \
    --etcd-binary "$BIN/etcd" \
    --kube-apiserver-binary "$BIN/kube-apiserver" \
    --kube-controller-manager-binary "$BIN/kube-controller-manager" \
    --kube-scheduler-binary "$BIN/kube-scheduler" \
    --kwok-controller-binary "$BIN/kwok" \
    --wait 2m
  kwokctl get kubeconfig --name "$NAME" >"$KUBECONFIG_OUT"
  chmod 600 "$KUBECONFIG_OUT"
  fake_nodes "$NODES" | kubectl apply -f - >/dev/null
  kubectl wait --for=condition=Ready node --all --timeout=2m >/dev/null
  kubectl get nodes
  echo
  echo "Cluster $NAME is up. Use it with:"
  echo "  export KUBECONFIG=$KUBECONFIG_OUT"
  echo "  $BIN/kubectl get nodes"
}

down() {
  if kwokctl get clusters 2>/dev/null | grep -qx "$NAME"; then
    kwokctl delete cluster --name "$NAME"
  else
    echo "cluster $NAME does not exist" >&2
  fi
  rm -f "$KUBECONFIG_OUT"
}

case ${1:-} in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
