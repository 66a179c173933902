#!/bin/bash
# Fails, naming them, when the runtime's transitive deps (a genquery's output) hold a target
# of the compiler side.
set -euo pipefail
compiler=$(grep -E '^//(ir|passes|codegen|compiler)[:/]' "$1" || true)
if [[ -n "$compiler" ]]; then
  echo "the runtime depends on compiler targets:" >&2
  echo "$compiler" >&2
  exit 1
fi
count=$(grep -c '^//' "$1")
echo "runtime_layering_test: $count targets in the runtime's deps, none of the compiler"
