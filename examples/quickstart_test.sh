#!/bin/bash
# The quickstart builds, compiles, loads and runs its model and agrees with the
# interpreter; the deploy example serves the artifact it wrote.
set -euo pipefail
bin=$(cd "$(dirname "$0")" && pwd)
cd "${TEST_TMPDIR:-/tmp}"
out=$("$bin/quickstart")
grep -q '^graph @quickstart_mlp(%x: f32\[4,8\], param %mlp.0.weight: f32\[8,16\]' <<<"$out"
grep -q '%probs: f32\[4,3\] = softmax(' <<<"$out"
grep -q '^== compiled to quickstart_mlp.kiln' <<<"$out"
[ "$(grep -c '^  row [0-3]: 0\.[0-9]\{4\} 0\.[0-9]\{4\} 0\.[0-9]\{4\}$' <<<"$out")" = 4 ]
grep -q '^== largest difference from the interpreter' <<<"$out"
# deploy: one line of 32 numbers in, 12 probabilities out; a short line is an error.
reply=$(printf '%s\n1 2 3\n' "$(seq -s ' ' 1 32)" | "$bin/deploy" quickstart_mlp.kiln)
[ "$(head -1 <<<"$reply" | wc -w)" = 12 ]
grep -q '^error: expected 32 numbers for %x: f32\[4,8\]$' <<<"$reply"
# Under `bazel run` (BUILD_WORKING_DIRECTORY set), the artifact lands where the user is.
mkdir -p user_dir elsewhere
(cd elsewhere && BUILD_WORKING_DIRECTORY="$PWD/../user_dir" "$bin/quickstart" > /dev/null)
[ -f user_dir/quickstart_mlp.kiln ] && [ ! -f elsewhere/quickstart_mlp.kiln ]
