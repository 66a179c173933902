#!/bin/bash
# The quickstart runs, prints its IR and four rows of probabilities.
set -euo pipefail
out=$("$(dirname "$0")/quickstart")
grep -q '^graph @quickstart_mlp(%x: f32\[4,8\], param %mlp.0.weight: f32\[8,16\]' <<<"$out"
grep -q '%probs: f32\[4,3\] = softmax(' <<<"$out"
[ "$(grep -c '^  row [0-3]: 0\.[0-9]\{4\} 0\.[0-9]\{4\} 0\.[0-9]\{4\}$' <<<"$out")" = 4 ]
