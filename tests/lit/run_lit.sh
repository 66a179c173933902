#!/bin/bash
# Runs the lit text tests under Bazel: kiln from this build, FileCheck and lit from
# llvm-19-tools. Arguments: kiln binary, FileCheck binary, lit.py, kiln-run binary,
# serve_client binary.
set -euo pipefail
kiln=$(realpath "$1")
filecheck=$(realpath "$2")
lit=$(realpath "$3")
bin=$(mktemp -d "${TEST_TMPDIR:-/tmp}/bin.XXXXXX")
ln -s "$kiln" "$bin/kiln"
ln -s "$filecheck" "$bin/FileCheck"
ln -s "$(dirname "$filecheck")/not" "$bin/not"
ln -s "$(dirname "$filecheck")/split-file" "$bin/split-file"
ln -s "$(realpath "$4")" "$bin/kiln-run"
ln -s "$(realpath "$5")" "$bin/serve_client"
export KILN_LIT_PATH="$bin"
exec /usr/bin/python3 "$lit" -sv "$(dirname "$0")/lit"
