#!/usr/bin/env bash
# Builds this checkout's release artifacts (.goreleaser.yml) with the pinned
# goreleaser, as a snapshot: nothing is tagged, published or announced.
#
#   hack/release-snapshot.sh              into dist/ (make release-snapshot)
#   hack/release-snapshot.sh --dist DIR   into DIR (the mirror install test)
#
# SHA256SUMS is signed only when GPG_FINGERPRINT names a key of the local gpg
# keyring; without one the signing step is skipped.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

die() { printf '[release] ERROR: %s\n' "$*" >&2; exit 1; }

dist=""
case ${1:-} in
  "") ;;
  --dist) [ $# -eq 2 ] || die "usage: hack/release-snapshot.sh [--dist DIR]"; dist=$2 ;;
  *) die "usage: hack/release-snapshot.sh [--dist DIR]" ;;
esac

"$here/tools.sh" goreleaser >/dev/null
goreleaser=$("$here/tools.sh" --dir)/goreleaser
cd "$root"

args=(release --snapshot --clean)
if [ -z "${GPG_FINGERPRINT:-}" ]; then
  args+=(--skip=sign)
fi
if [ -n "$dist" ]; then
  # dist is a setting of the configuration only: build from a copy that adds it.
  if grep -q '^dist:' .goreleaser.yml; then
    die ".goreleaser.yml sets dist; --dist needs the default (remove the dist line)"
  fi
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/nm-release.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  { cat .goreleaser.yml; printf '\ndist: "%s"\n' "$dist"; } >"$tmp/goreleaser.yml"
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
printf '[release] snapshot built in %ss into %s\n' "$((SECONDS - start))" "${dist:-$root/dist}" >&2
