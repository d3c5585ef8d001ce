#!/usr/bin/env bash
# Builds the pinned test toolchain from Go module source into a cache outside the
# checkout. Nothing prebuilt is downloaded and nothing on PATH is used.
#
#   hack/tools.sh [TOOL...]     build what is missing (default: all but kube-control-plane)
#   hack/tools.sh --dir         print the directory holding the binaries
#   hack/tools.sh --check       exit 1 and name what is missing, build nothing
#
# Every tool lives in its own versioned directory ($NM_TOOLS_DIR/<tool>-<version>),
# so a version bump rebuilds only that tool. A build happens in a scratch directory
# under an flock and is moved into place at the end, so two concurrent runs never
# see a half-written binary. The bin/ directory holds symlinks to the current set.
#
# kube-control-plane is the part of kubernetes that a cluster of fake nodes
# runs (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl):
# `make demo` and `make cluster-up` need no kubelet or kube-proxy. Those share
# most packages with the rest (their own are about 5% of the source), so this
# saves their links and a few minutes, not half. It lives in kubernetes'
# directory, so whichever of the two names comes second builds only the
# binaries still missing there.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

TOOLS_DIR=${NM_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/terraform-provider-nodemaintenance/tools}
BIN_DIR=$TOOLS_DIR/bin
export GOFLAGS=-buildvcs=false
export GOTOOLCHAIN=local
export CGO_ENABLED=0

ALL_TOOLS=(etcd kubernetes kwok kwok-stages controller-gen tofu terraform staticcheck pulumi pulumi-language-yaml goreleaser prometheus promtool)
# Asked for by name only: `kubernetes` (in ALL_TOOLS) includes it.
PART_TOOLS=(kube-control-plane)

# binaries each tool provides, and the versioned directory it lives in
tool_bins() {
  case $1 in
    etcd) echo etcd ;;
    kubernetes) echo kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy ;;
    kube-control-plane) echo kube-apiserver kube-controller-manager kube-scheduler kubectl ;;
    kwok) echo kwok kwokctl ;;
    kwok-stages) echo kwok-stages.yaml ;;
    controller-gen) echo controller-gen ;;
    tofu) echo tofu ;;
    terraform) echo terraform ;;
    staticcheck) echo staticcheck ;;
    pulumi) echo pulumi ;;
    pulumi-language-yaml) echo pulumi-language-yaml ;;
    goreleaser) echo goreleaser ;;
    prometheus) echo prometheus ;;
    promtool) echo promtool ;;
    *) echo "unknown tool: $1 (known: ${ALL_TOOLS[*]} ${PART_TOOLS[*]})" >&2; return 1 ;;
  esac
}
tool_version() {
  case $1 in
    etcd) echo "$ETCD_VERSION" ;;
    kubernetes | kube-control-plane) echo "$KUBERNETES_VERSION" ;;
    kwok | kwok-stages) echo "$KWOK_VERSION" ;;
    controller-gen) echo "$CONTROLLER_TOOLS_VERSION" ;;
    tofu) echo "$OPENTOFU_VERSION" ;;
    terraform) echo "$TERRAFORM_VERSION" ;;
    staticcheck) echo "$STATICCHECK_VERSION" ;;
    pulumi) echo "$PULUMI_VERSION" ;;
    pulumi-language-yaml) echo "$PULUMI_YAML_VERSION" ;;
    goreleaser) echo "$GORELEASER_VERSION" ;;
    prometheus | promtool) echo "$PROMETHEUS_VERSION" ;;
  esac
}
# the tool whose directory (and lock) a tool shares
tool_home() {
  case $1 in
    kube-control-plane) echo kubernetes ;;
    *) echo "$1" ;;
  esac
}
tool_dir() { echo "$TOOLS_DIR/$(tool_home "$1")-$(tool_version "$1")"; }

is_built() {
  local dir b
  dir=$(tool_dir "$1")
  # .complete marks a directory that holds all of its tool's binaries; a part
  # (kube-control-plane) may be there before the rest, each binary moved in
  # whole (build_tool).
  [ "$(tool_home "$1")" != "$1" ] || [ -f "$dir/.complete" ] || return 1
  for b in $(tool_bins "$1"); do [ -e "$dir/$b" ] || return 1; done
}

log() { printf '[tools] %s\n' "$*" >&2; }

# A throwaway module that requires MODULE@VERSION and builds PKGS into OUT.
# A tools.go file imports the commands so `go mod tidy` records their deps.
build_from_throwaway_module() {
  local work=$1 out=$2 module=$3 version=$4; shift 4
  local pkgs=("$@") p
  mkdir -p "$work/mod"
  (
    cd "$work/mod"
    go mod init nm-tools-throwaway >/dev/null 2>&1
    {
      echo '//go:build tools'
      echo
      echo 'package tools'
      echo
      echo 'import ('
      for p in "${pkgs[@]}"; do echo "	_ \"$p\""; done
      echo ')'
    } >tools.go
    go mod edit -require "$module@$version"
    if [ -n "${EXTRA_REPLACES:-}" ]; then
      local r
      for r in $EXTRA_REPLACES; do go mod edit -replace "$r"; done
    fi
    go mod tidy
    # One invocation for every command: the packages they share compile once
    # and the two cores stay busy (-o DIR/ names each binary after its package).
    log "go build ${pkgs[*]}"
    go build -trimpath -ldflags "${LDFLAGS:-}" -o "$out/" "${pkgs[@]}"
  )
}

# Copy a module's source out of the module cache (read-only there) so it can be
# built with its own go.mod, which `go install` refuses for modules with replaces.
copy_module_source() {
  local module=$1 version=$2 dest=$3 dir
  dir=$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || { log "could not download $module@$version"; return 1; }
  cp -R "$dir" "$dest"
  chmod -R u+w "$dest"
}

# Terraform 1.6 and later keep the remote-state backends (s3, gcs, azurerm, ...)
# and internal/legacy in modules of their own, which the main module reaches by
# `replace ... => ./internal/...` directories that its module zip does not hold.
# The tests use the local backend only: drop each replace whose directory is
# missing, and the lines of internal/backend/init that register its backend.
# Such a terraform says "unsupported backend" for those, nothing else changes.
drop_missing_terraform_backends() {
  local src=$1 init=$1/internal/backend/init/init.go mod dir alias
  while read -r mod dir; do
    if [ -z "$mod" ] || [ -d "$src/$dir" ]; then continue; fi
    alias=$(sed -n "s/^[[:space:]]*\([A-Za-z0-9_]*\) \"${mod//\//\\/}\"\$/\1/p" "$init")
    (cd "$src" && go mod edit -dropreplace "$mod" -droprequire "$mod")
    sed -i "\\|\"$mod\"|d" "$init"
    if [ -n "$alias" ]; then sed -i "/\\b$alias\\./d" "$init"; fi
  done < <(cd "$src" && go mod edit -json | sed -n 's/.*"Path": "\(github.com\/hashicorp\/terraform\/[^"]*\)".*/\1/p' |
    while read -r m; do echo "$m ./${m#github.com/hashicorp/terraform/}"; done | sort -u)
}

build_tool() {
  local tool=$1 version work out dir
  version=$(tool_version "$tool")
  dir=$(tool_dir "$tool")
  work=$(mktemp -d "$TOOLS_DIR/.build-$tool.XXXXXX")
  out=$work/out
  mkdir -p "$out"
  local start=$SECONDS
  # The binaries of the tool that are not in its directory yet: all of them,
  # except where a part of a shared directory (kube-control-plane) was built.
  local b missing=()
  for b in $(tool_bins "$tool"); do [ -e "$dir/$b" ] || missing+=("$b"); done
  log "building $tool $version (${missing[*]}; cold builds take minutes, see docs/development.md, The toolchain)"
  case $tool in
    etcd)
      mkdir -p "$work/mod"
      cat >"$work/mod/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
      (cd "$work/mod" && go mod init nm-etcd >/dev/null 2>&1 &&
        go mod edit -require "go.etcd.io/etcd/server/v3@$version" &&
        go mod tidy && go build -trimpath -o "$out/etcd" .)
      ;;
    kubernetes | kube-control-plane)
      # k8s.io/kubernetes replaces its staging modules with ./staging paths; a
      # consumer must replace each with the matching published v0.x release.
      # (nothing to build when a run ended before it marked the directory complete)
      if [ ${#missing[@]} -gt 0 ]; then
        local gomod staging_version=${version/v1./v0.} replaces=""
        gomod=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
        # shellcheck disable=SC2013 # one module path per word on purpose: paths have no spaces
        for m in $(sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*#\1#p' "$gomod"); do
          replaces+=" $m=$m@$staging_version"
        done
        local minor=${version#v1.}; minor=${minor%%.*}
        EXTRA_REPLACES=$replaces \
          LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$version" \
          build_from_throwaway_module "$work" "$out" k8s.io/kubernetes "$version" \
          "${missing[@]/#/k8s.io/kubernetes/cmd/}"
      fi
      ;;
    kwok)
      LDFLAGS="-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$version" \
        build_from_throwaway_module "$work" "$out" sigs.k8s.io/kwok "$version" \
        sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl
      ;;
    kwok-stages)
      # kwokctl's built-in pod stages delete a terminating pod at once and
      # ignore the per-pod delay annotation. These are kwok's own stages
      # (fast node and pod lifecycle) with the general pod-delete stage, made
      # immediate by default but honouring
      # pod-delete.stage.kwok.x-k8s.io/delay, so tests can simulate a pod
      # whose graceful termination takes a while.
      local src
      src=$(go mod download -json "sigs.k8s.io/kwok@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')/kustomize/stage
      {
        for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
          pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml; do
          echo '---'; cat "$src/$f"
        done
        echo '---'
        sed -e 's/durationMilliseconds: 1000/durationMilliseconds: 0/' -e '/jitterDurationFrom:/,+1d' "$src/pod/general/pod-delete.yaml"
      } >"$out/kwok-stages.yaml"
      grep -q 'pod-delete.stage.kwok.x-k8s.io/delay' "$out/kwok-stages.yaml"
      ;;
    controller-gen)
      GOBIN=$out go install "sigs.k8s.io/controller-tools/cmd/controller-gen@$version"
      ;;
    staticcheck)
      GOBIN=$out go install "honnef.co/go/tools/cmd/staticcheck@$version"
      ;;
    tofu)
      copy_module_source github.com/opentofu/opentofu "$version" "$work/src"
      # version.dev=no: a release's version (1.11.7), not 1.11.7-dev.
      (cd "$work/src" && go build -trimpath -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" -o "$out/tofu" ./cmd/tofu)
      ;;
    terraform)
      copy_module_source github.com/hashicorp/terraform "$version" "$work/src"
      drop_missing_terraform_backends "$work/src"
      # version.dev=no: a release's version (1.16.4), not 1.16.4-dev.
      (cd "$work/src" && go build -trimpath -ldflags "-s -w -X github.com/hashicorp/terraform/version.dev=no" -o "$out/terraform" .)
      ;;
    pulumi)
      # pkg/v3 replaces sdk/v3 with ../sdk (a path outside the module zip):
      # drop that and require the sdk release of the same version instead.
      copy_module_source github.com/pulumi/pulumi/pkg/v3 "$version" "$work/src"
      (cd "$work/src" && go mod edit -dropreplace github.com/pulumi/pulumi/sdk/v3 \
        -require "github.com/pulumi/pulumi/sdk/v3@$version" && go mod tidy &&
        go build -trimpath -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$version" \
          -o "$out/pulumi" ./cmd/pulumi)
      ;;
    pulumi-language-yaml)
      # The language host that runs Pulumi YAML programs (Pulumi.yaml with runtime: yaml).
      GOBIN=$out go install -trimpath -ldflags "-s -w -X github.com/pulumi/pulumi-yaml/pkg/version.Version=$version" \
        "github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml@$version"
      ;;
    goreleaser)
      # Builds the release artifacts (make release-snapshot, and the mirror
      # install test). Its go.mod has no replaces, so go install builds it.
      GOBIN=$out go install -trimpath -ldflags "-s -w -X main.version=${version#v} -X main.builtBy=hack/tools.sh" \
        "github.com/goreleaser/goreleaser/v2@$version"
      ;;
    prometheus)
      # The rollout's alert-gate tests scrape a target of the test and
      # evaluate a rule. remove_all_sd leaves out every service discovery but
      # file and http (plugins/*.go of the module), the bulk of its
      # dependencies (cloud SDKs, client-go); without builtinassets the web
      # UI is not embedded, the API is all the tests use. No replaces in its
      # go.mod, so go install builds it.
      GOBIN=$out go install -trimpath -tags remove_all_sd \
        -ldflags "-s -w -X github.com/prometheus/common/version.Version=${version#v} -X github.com/prometheus/common/version.Branch=hack/tools.sh" \
        "github.com/prometheus/prometheus/cmd/prometheus@$version"
      ;;
    promtool)
      # `promtool check rules` and `promtool test rules` over the alert rules
      # of deploy/monitoring (TestAlertRules). The same tag as prometheus: its
      # plugins import stays, so remove_all_sd keeps the cloud SDKs out; it
      # still imports the kubernetes discovery itself (for `check config`),
      # so client-go is built. Its own directory, so either builds alone.
      GOBIN=$out go install -trimpath -tags remove_all_sd \
        -ldflags "-s -w -X github.com/prometheus/common/version.Version=${version#v} -X github.com/prometheus/common/version.Branch=hack/tools.sh" \
        "github.com/prometheus/prometheus/cmd/promtool@$version"
      ;;
  esac
  if [ "$(tool_home "$tool")" = kubernetes ]; then
    # One directory for both names: move the new binaries in beside the ones
    # there, each in one rename, and mark it complete once kubernetes' all are.
    mkdir -p "$dir"
    for b in "${missing[@]}"; do mv -f "$out/$b" "$dir/$b"; done
    local all=1
    for b in $(tool_bins kubernetes); do [ -e "$dir/$b" ] || all=; done
    [ -z "$all" ] || touch "$dir/.complete"
  else
    touch "$out/.complete"
    rm -rf "$dir"
    mv "$out" "$dir"
  fi
  rm -rf "$work"
  log "built $tool $version in $((SECONDS - start))s -> $dir"
}

link_bins() {
  local tool=$1 b
  mkdir -p "$BIN_DIR"
  for b in $(tool_bins "$tool"); do
    ln -sfn "$(tool_dir "$tool")/$b" "$BIN_DIR/.$b.tmp.$$"
    mv -Tf "$BIN_DIR/.$b.tmp.$$" "$BIN_DIR/$b"
  done
}

ensure_tool() {
  local tool=$1
  tool_bins "$tool" >/dev/null
  if ! is_built "$tool"; then
    mkdir -p "$TOOLS_DIR"
    exec {lock}>"$TOOLS_DIR/.lock-$(tool_home "$tool")"
    flock "$lock"
    # another run may have finished it while we waited for the lock
    is_built "$tool" || build_tool "$tool"
    flock -u "$lock"
    exec {lock}>&-
  fi
  link_bins "$tool"
}

case ${1:-} in
  --dir) echo "$BIN_DIR"; exit 0 ;;
  --check)
    missing=()
    for t in "${ALL_TOOLS[@]}"; do is_built "$t" || missing+=("$t"); done
    if [ ${#missing[@]} -gt 0 ]; then echo "missing tools: ${missing[*]} (run: make tools)" >&2; exit 1; fi
    exit 0
    ;;
esac

tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=("${ALL_TOOLS[@]}")
for t in "${tools[@]}"; do ensure_tool "$t"; done
log "tools ready in $BIN_DIR"
