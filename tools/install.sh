#!/bin/bash
# Builds kiln (-c opt) and installs it under PREFIX for programs built outside this
# repository: see docs/embedding.md for the layout and how CMake, pkg-config and Bazel
# find it. usage: tools/install.sh PREFIX
set -euo pipefail
if [[ $# -ne 1 || $1 == -h || $1 == --help ]]; then
  echo "usage: tools/install.sh PREFIX   (for example /usr/local or \$HOME/.local)" >&2
  exit 2
fi
prefix=$1
cd "$(dirname "$0")/.."
targets=(//tools:kiln //tools:kiln-run //runtime:libkiln_runtime.so //compiler:libkiln_compiler.so //serving:libkiln_serving.so)
bazel build -c opt "${targets[@]}"
bin=$(bazel info -c opt bazel-bin 2>/dev/null)
headers=$(bazel query 'kind("source file", deps(//runtime:public_headers) + deps(//compiler:public_headers) + deps(//serving:public_headers))' 2>/dev/null |
  sed -E 's|^//||; s|^:||; s|:|/|')
version=$(sed -nE 's/.*kVersion = "([^"]+)".*/\1/p' base/version.h)
tools/install_tree.sh "$prefix" "$version" --bazel-repos third_party/rules_cc third_party/rules_java third_party/remote_coverage_tools --bin "$bin/tools/kiln" "$bin/tools/kiln-run" \
  --lib "$bin/runtime/libkiln_runtime.so" "$bin/compiler/libkiln_compiler.so" "$bin/serving/libkiln_serving.so" \
  --include $headers
