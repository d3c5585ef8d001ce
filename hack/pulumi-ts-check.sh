#!/usr/bin/env bash
# Type-checks the generated TypeScript SDK and the examples/pulumi-ts program
# with tsc against @pulumi/pulumi from npm, the way a user gets them:
#   1. pulumi/sdk/nodejs: npm ci, then tsc builds bin/ (the package as it would
#      be published, package.json and README.md copied in);
#   2. examples/pulumi-ts: npm ci installs that package (a copy, see its
#      .npmrc) and @pulumi/pulumi, then tsc --noEmit checks index.ts.
# Both lock files are committed, so every run checks against the same
# versions. node_modules/ and bin/ are git-ignored; npm keeps its cache where
# it always does (~/.npm), outside the checkout. Nothing is run: the Node.js
# language host cannot be built here.
set -euo pipefail
cd "$(dirname "$0")/.."

for cmd in node npm; do
  command -v "$cmd" >/dev/null || {
    echo "pulumi-ts-check: $cmd is missing; install Node.js 20 or newer with npm (on Debian: make tools)" >&2
    exit 1
  }
done

npm_ci() {
  if ! npm ci --no-audit --no-fund --loglevel=error; then
    echo "pulumi-ts-check: npm ci failed in $PWD. If package.json changed (make pulumi-sdks), update the lock file: npm install --package-lock-only" >&2
    return 1
  fi
}

sdk=pulumi/sdk/nodejs
echo "[ts] $sdk: npm ci, tsc"
(
  cd "$sdk"
  npm_ci
  rm -rf bin
  npx --no-install tsc
  cp package.json README.md bin/
)

echo "[ts] examples/pulumi-ts: npm ci, tsc --noEmit"
(
  cd examples/pulumi-ts
  npm_ci
  npx --no-install tsc --noEmit
)
echo "[ts] the TypeScript SDK and examples/pulumi-ts type-check"
