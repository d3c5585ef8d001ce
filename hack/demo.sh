#!/usr/bin/env bash
# The main job on a fresh machine: build what is missing, start a local cluster
# with a realistic workload, install the operator with the module of
# examples/modules/node-maintenance and run it as its ServiceAccount, put node02
# into maintenance with `apply`, then restore it and remove the operator with
# one `destroy`. OpenTofu by default, TF=terraform for Terraform. Exits non-zero
# when any step fails; always tears down.
# It builds only what it runs: etcd, the Kubernetes control plane and kubectl,
# kwok and the one CLI. Its nodes are kwok's fakes, so no kubelet, kube-proxy or
# Debian package (hack/apt.sh) is needed.
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
"$here/tools.sh" etcd kube-control-plane kwok kwok-stages "$TF" >/dev/null
rm -rf "$work" && mkdir -p "$work/bin" "$work/tf"
(cd "$root" && go build -o "$work/bin/" ./operator/cmd/node-maintenance-operator ./hack/webhookcerts .)

step "Starting a local cluster with three fake nodes"
NODES=3 REAL_NODES=0 "$here/cluster.sh" up >/dev/null
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

# The module installs the operator with the webhook sent by URL to the
# operator process this demo runs (kwok runs the Deployment's pods as fakes):
# a CA and a serving certificate for 127.0.0.1, made by the operator's own code.
certs=$work/certs
"$work/bin/webhookcerts" "$certs" 127.0.0.1

mkdir -p "$work/tf/modules"
cp "$here/demo/main.tf" "$work/tf/"
cp -R "$root/examples/modules/node-maintenance" "$work/tf/modules/"
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
export TF_VAR_kubeconfig=$KUBECONFIG_OUT TF_VAR_webhook_url=https://127.0.0.1:19443 TF_VAR_webhook_ca_file=$certs/ca.crt
tf() { (cd "$work/tf" && "$BIN/$TF" "$@"); }
# The provider logs a line on every status change: show those, in order with
# the CLI's own output, as the timeline; drop the rest of the log.
# The CLI relays provider logs a little late, so each line carries its time
# (to the millisecond). A log line is "<RFC 3339 time> [LEVEL] <source>:
# <message>: @key=value... tf_key=value... timestamp=...".
log_line_re='^[0-9]{4}-[0-9]{2}-[0-9]{2}T([0-9:]+)(\.[0-9]{1,3})?[0-9]*Z \['
provider_prefix='provider.terraform-provider-nodemaintenance: NodeMaintenance '
timeline() {
  local line ts msg sep
  while IFS= read -r line || [ -n "$line" ]; do
    if ! [[ $line =~ $log_line_re ]]; then
      printf '%s\n' "$line" # the CLI's own output
      continue
    fi
    ts=${BASH_REMATCH[1]}${BASH_REMATCH[2]}
    [[ $line == *"$provider_prefix"* ]] || continue
    msg="NodeMaintenance ${line#*"$provider_prefix"}"
    # The message ends at the first ": " that starts the fields.
    local found=
    for sep in ': @' ': tf_' ': timestamp='; do
      if [[ $msg == *"$sep"* ]]; then msg=${msg%%"$sep"*}; found=1; fi
    done
    [ -z "$found" ] || printf '  | %s %s\n' "$ts" "$msg"
  done
}
# Plain apply with the provider's progress lines; "| " lines are the timeline.
tf_apply() { TF_LOG_PROVIDER=INFO tf "$@" -auto-approve -no-color 2>&1 | timeline; }

step "$TF apply: install the operator with the module examples/modules/node-maintenance (no node yet)"
tf get -no-color >/dev/null # the module; the provider comes from the dev override
tf_apply apply
ns=$(tf output -raw operator_namespace)
# No node listed is not success (as for the nodemaintenance_list data source).
echo "all_succeeded = $(tf output -raw all_succeeded) (no node yet)"
kubectl -n "$ns" get serviceaccounts,deployments,services
kubectl get crd nodemaintenances.nodemaintenance.medik8s.io

step "Running the operator on this machine as its ServiceAccount $ns/node-maintenance-operator"
# Its own token (TokenRequest), so it can do only what the installed RBAC allows.
token=$(kubectl -n "$ns" create token node-maintenance-operator --duration=1h)
cp "$KUBECONFIG_OUT" "$work/operator.kubeconfig"
opkubectl() { "$BIN/kubectl" --kubeconfig "$work/operator.kubeconfig" "$@"; }
opkubectl config set-credentials node-maintenance-operator --token="$token" >/dev/null
opkubectl config set-context "$(opkubectl config current-context)" --user=node-maintenance-operator >/dev/null
"$work/bin/node-maintenance-operator" --kubeconfig "$work/operator.kubeconfig" --namespace "$ns" --leader-elect \
  --webhook-port 19443 --webhook-host 127.0.0.1 --webhook-cert-dir "$certs" --webhook-secret-name= \
  --metrics-bind-address 127.0.0.1:18080 --health-probe-bind-address 127.0.0.1:18081 >"$work/operator.log" 2>&1 &
operator_pid=$!
# readyz asks the operator's health endpoint with bash's /dev/tcp (no curl).
readyz() {
  (
    exec 3<>/dev/tcp/127.0.0.1/18081 || exit 1
    printf 'GET /readyz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
    IFS= read -r -t 5 status <&3 && [[ $status == "HTTP/1."?" 200 "* ]]
  ) 2>/dev/null
}
for _ in $(seq 1 120); do
  readyz && break
  kill -0 "$operator_pid" 2>/dev/null || { echo "the operator exited" >&2; exit 1; }
  sleep 0.5
done
readyz || { echo "the operator is not ready after 60 s" >&2; exit 1; }
echo "operator ready (log: $work/operator.log)"

step "$TF apply: put node02 into maintenance (| lines: the provider's progress timeline)"
export TF_VAR_nodes='{"node02" = "硬體更換 - RAM 升級"}'
tf_apply apply
all_succeeded=$(tf output -raw all_succeeded)
echo "all_succeeded = $all_succeeded"
[ "$all_succeeded" = true ] || { echo "the module's all_succeeded is $all_succeeded after the maintenance of node02" >&2; exit 1; }

step "kubectl get nm -o wide"
kubectl get nm -o wide
kubectl get nodes
echo "pods left on node02 (the DaemonSet pod stays):"
kubectl get pods -A --field-selector spec.nodeName=node02 --no-headers

step "$TF destroy: end the maintenance, restore node02, then remove the operator"
tf_apply destroy
kubectl get nodes
if [ "$(kubectl get node node02 -o jsonpath='{.spec.unschedulable}')" = "true" ]; then
  echo "node02 is still cordoned after destroy" >&2
  exit 1
fi
if kubectl get namespace "$ns" -o name 2>/dev/null | grep -q . && [ -z "$(kubectl get namespace "$ns" -o jsonpath='{.metadata.deletionTimestamp}')" ]; then
  echo "the operator namespace $ns is still there after destroy" >&2
  exit 1
fi

step "Done in $((SECONDS - start))s: node02 was drained and restored; tearing down"
