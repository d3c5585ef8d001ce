#!/usr/bin/env bash
# Runs a generator and fails if it changed, added or deleted any file under the
# given paths: what is committed must be exactly what the generator produces.
#   hack/verify-generated.sh "<generate command>" PATH...
set -euo pipefail
cmd=$1; shift
# "<sha256>  <path>" for every tracked or new (not ignored) file that exists
# under the paths; a tracked file the generator deleted drops out of the list.
snapshot() {
  git ls-files -z -co --exclude-standard -- "$@" | sort -zu |
    while IFS= read -r -d '' f; do if [ -e "$f" ]; then printf '%s\0' "$f"; fi; done |
    xargs -0 -r sha256sum
}
before=$(snapshot "$@")
eval "$cmd"
after=$(snapshot "$@")
if [ "$before" != "$after" ]; then
  echo "Generated files drifted: '$cmd' changed:" >&2
  # sha256sum prints 64 hex digits, two spaces, the path.
  awk 'NR == FNR { if ($0 != "") before[substr($0, 67)] = substr($0, 1, 64); next }
    $0 != "" { after[substr($0, 67)] = substr($0, 1, 64) }
    END {
      for (p in before) if (!(p in after)) print "  deleted:  " p; else if (before[p] != after[p]) print "  modified: " p
      for (p in after) if (!(p in before)) print "  new:      " p
    }' <(printf '%s\n' "$before") <(printf '%s\n' "$after") | sort -b -k2 >&2
  echo "Run '$cmd' and commit the result." >&2
  exit 1
fi
echo "generated files are up to date ($*)"
