#!/usr/bin/env bash
# The main job on a fresh machine: build what is missing, start a local cluster
# with a realistic workload, run the operator, and put node02 into maintenance
# with `apply`, then restore it with `destroy`. OpenTofu by default, TF=terraform
# for Terraform. Exits non-zero when any step fails; always tears down.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
TF=${TF:-tofu}
case $TF in tofu | terraform) ;; *) echo "TF must be tofu or terraform, not $TF" >&2; exit 2 ;; esac
export NAME=${NAME:-nodemaintenance-demo}
work=$root/.local/demo
export KUBECONFIG_OUT=$work/kubeconfig
export KWOK_WORKDIR=$work/kwok
BIN=$("$here/tools.sh" --dir)
kubectl() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_OUT" "$@"; }
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
start=$SECONDS

operator_pid=
cleanup() {
  local rc=$?
  if [ -n "$operator_pid" ]; then kill "$operator_pid" 2>/dev/null || true; wait "$operator_pid" 2>/dev/null || true; fi
  "$here/cluster.sh" down >/dev/null 2>&1 || true
  if [ $rc -ne 0 ]; then
    echo "demo failed (exit $rc); operator log: $work/operator.log" >&2
    tail -n 20 "$work/operator.log" 2>/dev/null >&2 || true
  fi
  exit $rc
}
trap cleanup EXIT

step "Building what is missing (the first run builds the pinned toolchain from source)"
"$here/tools.sh" etcd kubernetes kwok kwok-stages "$TF" >/dev/null
rm -rf "$work" && mkdir -p "$work/bin" "$work/tf"
(cd "$root" && go build -o "$work/bin/" ./operator/cmd/node-maintenance-operator .)

step "Starting a local cluster with three fake nodes"
NODES=3 "$here/cluster.sh" up >/dev/null
kubectl get nodes

step "Deploying a workload: a Deployment under a PodDisruptionBudget, a DaemonSet and a bare pod on node02"
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 6
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers: [{name: web, image: registry.k8s.io/pause:3.10}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: shop}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: node-agent, namespace: shop}
spec:
  selector: {matchLabels: {app: node-agent}}
  template:
    metadata: {labels: {app: node-agent}}
    spec:
      containers: [{name: agent, image: registry.k8s.io/pause:3.10}]
---
apiVersion: v1
kind: Pod
metadata: {name: debug, namespace: shop}
spec:
  nodeName: node02
  terminationGracePeriodSeconds: 1
  containers: [{name: debug, image: registry.k8s.io/pause:3.10}]
YAML
kubectl -n shop rollout status deployment/web --timeout=2m >/dev/null
kubectl -n shop wait --for=condition=Ready pod/debug --timeout=1m >/dev/null
kubectl -n shop get pods -o wide --field-selector spec.nodeName=node02

step "Running the node-maintenance operator (out of cluster, webhook on 127.0.0.1)"
"$work/bin/node-maintenance-operator" --kubeconfig "$KUBECONFIG_OUT" --install-crd \
  --local-webhook-url https://127.0.0.1:19443 --webhook-port 19443 --webhook-host 127.0.0.1 \
  --metrics-bind-address 127.0.0.1:18080 --health-probe-bind-address 127.0.0.1:18081 >"$work/operator.log" 2>&1 &
operator_pid=$!
for _ in $(seq 1 120); do
  curl -fsS http://127.0.0.1:18081/readyz >/dev/null 2>&1 && break
  kill -0 "$operator_pid" 2>/dev/null || { echo "the operator exited" >&2; exit 1; }
  sleep 0.5
done
curl -fsS http://127.0.0.1:18081/readyz >/dev/null
echo "operator ready (log: $work/operator.log)"

cp "$here/demo/main.tf" "$work/tf/"
cat >"$work/cli.tfrc" <<EOF2
provider_installation {
  dev_overrides {
    "registry.terraform.io/nodemaintenance/nodemaintenance" = "$work/bin"
    "registry.opentofu.org/nodemaintenance/nodemaintenance" = "$work/bin"
  }
  direct {}
}
EOF2
export TF_CLI_CONFIG_FILE=$work/cli.tfrc CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1
export TF_VAR_kubeconfig=$KUBECONFIG_OUT
tf() { (cd "$work/tf" && "$BIN/$TF" "$@"); }
# The provider logs a line on every status change: show those, in order with
# the CLI's own output, as the timeline; drop the rest of the log.
timeline() {
  perl -ne 'if (/^\d{4}-\d\d-\d\dT[\d:.]+Z \[/) { print "  | $1\n" if /provider\.terraform-provider-nodemaintenance: (NodeMaintenance .*?): (?:@\w+|tf_\w+|timestamp)=/; } else { print }'
}

step "$TF apply: put node02 into maintenance (| lines: the provider's progress timeline)"
TF_LOG_PROVIDER=INFO tf apply -auto-approve -no-color 2>&1 | timeline

step "kubectl get nm -o wide"
kubectl get nm -o wide
kubectl get nodes
echo "pods left on node02 (the DaemonSet pod stays):"
kubectl get pods -A --field-selector spec.nodeName=node02 --no-headers

step "$TF destroy: end the maintenance and restore node02"
TF_LOG_PROVIDER=INFO tf destroy -auto-approve -no-color 2>&1 | timeline
kubectl get nodes
if [ "$(kubectl get node node02 -o jsonpath='{.spec.unschedulable}')" = "true" ]; then
  echo "node02 is still cordoned after destroy" >&2
  exit 1
fi

step "Done in $((SECONDS - start))s: node02 was drained and restored; tearing down"
