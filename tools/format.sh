#!/bin/bash
# Formats every C++ file of the repository with .clang-format (Debian's clang-format).
# usage: tools/format.sh [--check]   --check lists the files that would change, exit 1 if any
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format > /dev/null || { echo "format: error: clang-format is not installed (apt-get install clang-format)" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.cc' '*.h' | grep -v '^third_party/')
if [[ "${1:-}" == "--check" ]]; then
  changed=0
  for f in "${files[@]}"; do
    if ! clang-format "$f" | cmp -s - "$f"; then echo "$f"; changed=1; fi
  done
  exit $changed
fi
clang-format -i "${files[@]}"
