#!/usr/bin/env bash
# Regenerates the provider documentation in docs/ from the provider schema,
# templates/ and examples/, offline and reproducibly:
#
#   1. checks that examples/ is formatted (pinned `terraform fmt -check`);
#   2. builds the provider into a scratch directory;
#   3. writes the schema with the pinned `tofu providers schema -json`, using a
#      CLI config whose dev_overrides point at that build (no init, no registry);
#   4. validates every example file against that schema (pinned `tofu validate`);
#   5. renders docs/ with tfplugindocs, pinned as a Go tool in go.mod.
#
#   hack/docs.sh            regenerate docs/
#   hack/docs.sh --check    regenerate, and fail if that changed anything under docs/
#
# tfplugindocs is never given --tf-version (that always downloads Terraform):
# it reads the schema from the file written in step 3.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

case ${1:-} in
  "") ;;
  --check) exec "$here/verify-generated.sh" "$here/docs.sh" docs ;;
  *) echo "usage: hack/docs.sh [--check]" >&2; exit 2 ;;
esac

export GOFLAGS=-buildvcs=false GOTOOLCHAIN=local CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1
# Settings from the caller's shell that would change what the CLIs do here.
unset TF_CLI_ARGS TF_CLI_ARGS_providers TF_CLI_ARGS_validate TF_CLI_ARGS_fmt TF_DATA_DIR TF_WORKSPACE

PROVIDER_NAME=nodemaintenance
RENDERED_PROVIDER_NAME=NodeMaintenance

BIN=$("$here/tools.sh" --dir)
"$here/tools.sh" tofu terraform >/dev/null
TOFU=$BIN/tofu
TERRAFORM=$BIN/terraform

log() { printf '[docs] %s\n' "$*" >&2; }
die() { printf '[docs] ERROR: %s\n' "$*" >&2; exit 1; }
start=$SECONDS

tmp=$(mktemp -d "${TMPDIR:-/tmp}/nm-docs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cd "$root"

# A CLI config of our own (also keeps the caller's TF_CLI_CONFIG_FILE out). Its
# dev_overrides send every address the examples and the schema step use to the
# provider built below: tfplugindocs looks the schema up under
# registry.terraform.io/hashicorp/<name>; example files without required_providers
# mean hashicorp/<name>; the provider example says nodemaintenance/nodemaintenance.
mkdir -p "$tmp/bin"
cat >"$tmp/cli.tfrc" <<EOF
provider_installation {
  dev_overrides {
    "registry.terraform.io/hashicorp/$PROVIDER_NAME"       = "$tmp/bin"
    "registry.opentofu.org/hashicorp/$PROVIDER_NAME"       = "$tmp/bin"
    "registry.terraform.io/nodemaintenance/$PROVIDER_NAME" = "$tmp/bin"
    "registry.opentofu.org/nodemaintenance/$PROVIDER_NAME" = "$tmp/bin"
  }
  direct {}
}
EOF
export TF_CLI_CONFIG_FILE=$tmp/cli.tfrc

# 1. Examples are shown verbatim in the docs: they must be formatted.
log "terraform fmt -check examples"
if ! unformatted=$("$TERRAFORM" fmt -check -recursive -list=true examples 2>"$tmp/fmt.err"); then
  cat "$tmp/fmt.err" >&2
  if [ -n "$unformatted" ]; then
    while IFS= read -r f; do printf '[docs]   %s\n' "$f" >&2; done <<<"$unformatted"
    die "the example files above are not formatted. Run: $TERRAFORM fmt -recursive examples"
  fi
  die "terraform fmt could not read the examples (see above)"
fi

# 2. The provider, built from this checkout.
log "building the provider"
go build -o "$tmp/bin/terraform-provider-$PROVIDER_NAME" .

# 3. The schema, from the pinned Terraform (no init needed with dev_overrides):
# OpenTofu's has no actions and list resources.
mkdir -p "$tmp/schema"
cat >"$tmp/schema/main.tf" <<EOF
terraform {
  required_providers {
    $PROVIDER_NAME = {
      source = "registry.terraform.io/hashicorp/$PROVIDER_NAME"
    }
  }
}
EOF
log "terraform providers schema -json"
if ! (cd "$tmp/schema" && "$TERRAFORM" providers schema -json >"$tmp/schema.json" 2>"$tmp/schema.err"); then
  cat "$tmp/schema.err" >&2
  die "terraform could not read the provider schema"
fi

# 4. Every example file on its own must be valid for this schema (validate
# needs no cluster: the provider is not configured): with OpenTofu, except
# the actions and list resources, which only Terraform has.
log "validate examples (tofu; terraform for actions and list resources)"
n=0
while IFS= read -r f; do
  n=$((n + 1))
  d=$tmp/validate/$n
  mkdir -p "$d"
  cli=$TOFU args=(validate -no-color)
  case $f in
    examples/actions/*) cli=$TERRAFORM ;;
    *.tfquery.hcl) cli=$TERRAFORM args+=(-query) ;;
  esac
  cp "$f" "$d/$(basename "$f")"
  if ! (cd "$d" && "$cli" "${args[@]}" >"$d/out" 2>&1); then
    cat "$d/out" >&2
    die "$f is not valid for the provider schema ($(basename "$cli") validate)"
  fi
done < <(find examples \( -name '*.tf' -o -name '*.tfquery.hcl' \) -type f | LC_ALL=C sort)

# 5. docs/ (tfplugindocs removes and rewrites index.md and its own subdirectories).
log "tfplugindocs generate"
if ! go tool tfplugindocs generate \
  --provider-name "$PROVIDER_NAME" \
  --rendered-provider-name "$RENDERED_PROVIDER_NAME" \
  --providers-schema "$tmp/schema.json" \
  --examples-dir examples \
  --website-source-dir templates \
  --rendered-website-dir docs >"$tmp/tfplugindocs.log" 2>&1; then
  cat "$tmp/tfplugindocs.log" >&2
  die "tfplugindocs failed"
fi
if grep -i 'warn' "$tmp/tfplugindocs.log" >&2; then
  die "tfplugindocs warned (above): a template names a resource or data source the provider does not have"
fi

log "docs/ generated in $((SECONDS - start))s"
