#!/usr/bin/env bash
# Builds this checkout's release artifacts (.goreleaser.yml) with the pinned
# goreleaser, as a snapshot: nothing is tagged, published or announced.
#
#   hack/release-snapshot.sh              into dist/ (make release-snapshot)
#   hack/release-snapshot.sh --dist DIR   into DIR (the mirror install test)
#   hack/release-snapshot.sh --host-only  this machine's platform only (make
#                                         test: the tests install nothing else)
#
# goreleaser sums the release's extra files (the registry manifest) under
# their release names but writes them only when it uploads a release; the
# snapshot gets them copied into its directory (hack/releasefiles), which is
# then checked as users check a release: `sha256sum -c --strict` of its
# SHA256SUMS, every listed file present and matching.
#
# SHA256SUMS is signed only when GPG_FINGERPRINT names a key of the local gpg
# keyring; without one the signing step is skipped.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

die() { printf '[release] ERROR: %s\n' "$*" >&2; exit 1; }
usage="usage: hack/release-snapshot.sh [--dist DIR] [--host-only]"

dist=""
host_only=""
while [ $# -gt 0 ]; do
  case $1 in
    --dist) [ $# -ge 2 ] || die "$usage"; dist=$2; shift 2 ;;
    --host-only) host_only=1; shift ;;
    *) die "$usage" ;;
  esac
done

"$here/tools.sh" goreleaser >/dev/null
goreleaser=$("$here/tools.sh" --dir)/goreleaser
cd "$root"

# A cold build on a shared 2-core machine can pass goreleaser's default one-hour timeout.
args=(release --snapshot --clean --timeout 2h)
if [ -z "${GPG_FINGERPRINT:-}" ]; then
  args+=(--skip=sign)
fi
if [ -n "$dist$host_only" ]; then
  # dist and the platforms are settings of the configuration only (goreleaser
  # release has no --single-target): build from a copy that changes them.
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/nm-release.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  cp .goreleaser.yml "$tmp/goreleaser.yml"
  if [ -n "$host_only" ]; then
    goos=$(go env GOOS) goarch=$(go env GOARCH)
    if [ "$(grep -cE '^    goos: \[.*\]$' .goreleaser.yml)" != 1 ] || [ "$(grep -cE '^    goarch: \[.*\]$' .goreleaser.yml)" != 1 ]; then
      die "--host-only needs the build's goos and goarch in .goreleaser.yml as one-line lists (goos: [linux, ...]), once each"
    fi
    sed -i -E -e "s/^    goos: \[.*\]$/    goos: [$goos]/" -e "s/^    goarch: \[.*\]$/    goarch: [$goarch]/" "$tmp/goreleaser.yml"
  fi
  if [ -n "$dist" ]; then
    if grep -q '^dist:' .goreleaser.yml; then
      die ".goreleaser.yml sets dist; --dist needs the default (remove the dist line)"
    fi
    printf '\ndist: "%s"\n' "$dist" >>"$tmp/goreleaser.yml"
  fi
  args+=(--config "$tmp/goreleaser.yml")
fi

# goreleaser reads the commit (snapshot name, file times) only from a clone
# with a remote, and names it "none" otherwise. A checkout without one gets the
# project's address through git's environment: `git ls-remote --get-url` only
# prints it and never connects.
if [ -z "$(git remote)" ]; then
  export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url
  export GIT_CONFIG_VALUE_0=https://github.com/nodemaintenance/terraform-provider-nodemaintenance.git
fi

start=$SECONDS
"$goreleaser" "${args[@]}"
out=${dist:-$root/dist}
go run ./hack/releasefiles -dist "$out"
# What a user runs on a downloaded release: fails on a listed file that is
# missing or differs, and on a malformed line.
(cd "$out" && sha256sum --check --strict --quiet ./*_SHA256SUMS) ||
  die "$out does not match its SHA256SUMS (above: each file missing or different)"
printf '[release] snapshot built%s in %ss into %s; every file SHA256SUMS lists is there and matches\n' \
  "${host_only:+ for $(go env GOOS)/$(go env GOARCH) only}" "$((SECONDS - start))" "$out" >&2
