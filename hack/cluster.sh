#!/usr/bin/env bash
# A named local Kubernetes cluster (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok) run by `kwokctl --runtime binary` from the binaries that
# `make tools` built, with fake Ready nodes node01, node02, ... and, with
# REAL_NODES=N, N real nodes real01, ... beside them: a kubelet and a
# containerd each (hack/realnode, the code of the tests' RealNodes option),
# with everything they own under $KWOK_WORKDIR/realnodes/<node>, and one
# kube-proxy that serves the cluster's ClusterIPs to their pods (the
# `kubernetes` Service too, so in-cluster clients such as the operator work).
# Real nodes need root; their pods run images imported into their containerd
# (`ctr -a $KWOK_WORKDIR/realnodes/<node>/containerd.sock -n k8s.io images
# import`, imagePullPolicy IfNotPresent or Never), such as
# testcluster.WaiterImage, which every real node has: there is no registry.
# kube-proxy owns this machine's ClusterIP rules: one cluster with real nodes
# at a time (the real-node tests wait for it, then say which one holds them).
#
#   hack/cluster.sh up     [NAME=nodemaintenance] [NODES=3] [REAL_NODES=0] [KUBECONFIG_OUT=.local/kubeconfig]
#   hack/cluster.sh down
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
BIN=$("$here/tools.sh" --dir)
NAME=${NAME:-nodemaintenance}
NODES=${NODES:-3}
REAL_NODES=${REAL_NODES:-0}
KUBECONFIG_OUT=${KUBECONFIG_OUT:-$root/.local/kubeconfig}
export KWOK_WORKDIR=${KWOK_WORKDIR:-$root/.local/kwok}

# Every component talks to this machine only: kube-apiserver (which inherits
# kwokctl's environment) must not send what it dials through a proxy.
kwokctl() { env -u HTTP_PROXY -u HTTPS_PROXY -u NO_PROXY -u ALL_PROXY -u http_proxy -u https_proxy -u no_proxy -u all_proxy "$BIN/kwokctl" "$@"; }
realnode() { "$root/.local/bin/realnode" "$@"; }
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

# stop_real_nodes tears down the kube-proxy and the real nodes of a previous `up`.
stop_real_nodes() {
  local d
  if [ -d "$KWOK_WORKDIR/kube-proxy" ]; then
    if [ -x "$root/.local/bin/realnode" ]; then realnode kube-proxy-down --dir "$KWOK_WORKDIR"; else echo "cannot stop kube-proxy in $KWOK_WORKDIR/kube-proxy: .local/bin/realnode is gone" >&2; fi
  fi
  for d in "$KWOK_WORKDIR"/realnodes/*; do
    [ -d "$d" ] || continue
    if [ -x "$root/.local/bin/realnode" ]; then realnode down --dir "$d"; else echo "cannot stop real node $d: .local/bin/realnode is gone" >&2; fi
  done
}

up() {
  # Fake nodes need the control plane only; kubelet and kube-proxy come with REAL_NODES.
  local kubernetes=kube-control-plane
  [ "$REAL_NODES" -eq 0 ] || kubernetes=kubernetes
  "$here/tools.sh" etcd "$kubernetes" kwok kwok-stages >/dev/null
  mkdir -p "$(dirname "$KUBECONFIG_OUT")" "$KWOK_WORKDIR"
  local extra=()
  if [ "$REAL_NODES" -gt 0 ]; then
    "$here/apt.sh"
    (cd "$root" && go build -o .local/bin/realnode ./hack/realnode)
    mapfile -t extra < <(realnode kwokctl-args --dir "$KWOK_WORKDIR")
  fi
  stop_real_nodes
  if kwokctl get clusters 2>/dev/null | grep -qx "$NAME"; then
    echo "cluster $NAME already exists; recreating it" >&2
    kwokctl delete cluster --name "$NAME" >/dev/null
  fi
  kwokctl --config "$BIN/kwok-stages.yaml" create cluster --name "$NAME" --runtime binary "${extra[@]}" \
    --kubeconfig "$KWOK_WORKDIR/kubeconfig.merged" \
    --etcd-binary "$BIN/etcd" \
    --kube-apiserver-binary "$BIN/kube-apiserver" \
    --kube-controller-manager-binary "$BIN/kube-controller-manager" \
    --kube-scheduler-binary "$BIN/kube-scheduler" \
    --kwok-controller-binary "$BIN/kwok" \
    --wait 2m
  kwokctl get kubeconfig --name "$NAME" >"$KUBECONFIG_OUT"
  chmod 600 "$KUBECONFIG_OUT"
  if [ "$NODES" -gt 0 ]; then fake_nodes "$NODES" | kubectl apply -f - >/dev/null; fi
  local i node
  for i in $(seq 1 "$REAL_NODES"); do
    printf -v node 'real%02d' "$i"
    realnode up --name "$node" --dir "$KWOK_WORKDIR/realnodes/$node" --kubeconfig "$KUBECONFIG_OUT"
  done
  # `kubectl wait --all` waits only for nodes that exist: let the kubelets register first.
  for i in $(seq 1 "$REAL_NODES"); do
    printf -v node 'real%02d' "$i"
    for _ in $(seq 1 600); do kubectl get node "$node" >/dev/null 2>&1 && break; sleep 0.1; done
  done
  kubectl wait --for=condition=Ready node --all --timeout=2m >/dev/null
  if [ "$REAL_NODES" -gt 0 ]; then
    realnode kube-proxy-up --name real01 --dir "$KWOK_WORKDIR" --kubeconfig "$KUBECONFIG_OUT"
  fi
  kubectl get nodes
  echo
  echo "Cluster $NAME is up. Use it with:"
  echo "  export KUBECONFIG=$KUBECONFIG_OUT"
  echo "  $BIN/kubectl get nodes"
}

down() {
  stop_real_nodes
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
