#!/usr/bin/env bash
# Runs a generator and fails if it changed any file under the given paths:
# what is committed must be exactly what the generator produces.
#   hack/verify-generated.sh "<generate command>" PATH...
set -euo pipefail
cmd=$1; shift
snapshot() { git ls-files -co --exclude-standard -- "$@" | sort | xargs -r sha256sum; }
before=$(snapshot "$@")
eval "$cmd"
after=$(snapshot "$@")
if [ "$before" != "$after" ]; then
  echo "Generated files drifted: '$cmd' changed:" >&2
  diff <(echo "$before") <(echo "$after") | sed -n 's/^> [0-9a-f]*  /  /p' >&2 || true
  echo "Run '$cmd' and commit the result." >&2
  exit 1
fi
echo "generated files are up to date ($*)"
