#!/usr/bin/env bash
# Installs the Debian packages the project takes from the host's apt rather
# than building them (hack/tools.sh builds the Go toolchain): shellcheck, for
# `make lint`; containerd, runc and the CNI plugins, for the real (kubelet-run)
# node of `make cluster-up REAL_NODES=1` and the real-node test; iptables, for
# the kube-proxy that serves ClusterIPs to a real node's pods; podman (with
# runc), for `make verify-image` to run the built image; nodejs and npm when
# the node or npm command is missing, for `make pulumi-ts-check`. A no-op when
# every package is installed; otherwise runs
# apt-get, as root (or through sudo).
#
#   hack/apt.sh            install what is missing
#   hack/apt.sh --check    exit 1 and name what is missing, install nothing
set -euo pipefail

PACKAGES=(shellcheck containerd runc containernetworking-plugins iptables podman)

installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }

missing=()
for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
# Node.js and npm, for `make pulumi-ts-check` (tsc and @pulumi/pulumi from npm),
# go by command, not package: machines that have them from elsewhere (the
# nodesource nodejs package bundles npm, and conflicts with Debian's npm) keep
# them; where either command is missing, Debian's nodejs and npm come in.
command -v node >/dev/null && command -v npm >/dev/null || missing+=(nodejs npm)
[ ${#missing[@]} -gt 0 ] || exit 0
if [ "${1:-}" = --check ]; then
  echo "missing Debian packages: ${missing[*]} (run: make tools)" >&2
  exit 1
fi

command -v apt-get >/dev/null || {
  echo "hack/apt.sh: no apt-get here; install ${missing[*]} with your package manager" >&2
  exit 1
}
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "hack/apt.sh: installing ${missing[*]} needs root or sudo" >&2; exit 1; }
  sudo=(sudo)
fi
echo "[apt] installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# A fresh machine may have no package lists yet; update only when the install fails.
"${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null ||
  { "${sudo[@]}" apt-get update >/dev/null && "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; }
