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
# pytorch_weights: a state_dict in PyTorch's layout and names (written here without
# PyTorch), and the numbers PyTorch's forward would give, computed in plain Python.
python3 - "$bin/../tests/lit/cli/Inputs/write_safetensors.py" <<'PY' > expected.txt
import subprocess, sys
w1 = [[((o * 4 + i) % 7 - 3) / 10 for i in range(4)] for o in range(8)]
b1 = [(o - 4) / 20 for o in range(8)]
w2 = [[((o * 8 + i) % 5 - 2) / 10 for i in range(8)] for o in range(3)]
b2 = [0.1, -0.2, 0.3]
flat = lambda m: ",".join(str(v) for row in m for v in row)
subprocess.run([sys.executable, sys.argv[1], "mlp.safetensors", "fc1.weight=F32:8,4:" + flat(w1), "fc1.bias=F32:8:" + ",".join(map(str, b1)),
                "fc2.weight=F32:3,8:" + flat(w2), "fc2.bias=F32:3:" + ",".join(map(str, b2))], check=True)
for r in range(2):
    x = [(r * 4 + i) / 8 for i in range(4)]
    h = [max(0.0, sum(x[i] * w1[o][i] for i in range(4)) + b1[o]) for o in range(8)]
    print(" ".join("%.6f" % (sum(h[i] * w2[o][i] for i in range(8)) + b2[o]) for o in range(3)))
PY
"$bin/pytorch_weights" mlp.safetensors > got.txt
paste -d' ' got.txt expected.txt | awk '{ for (i = 1; i <= 3; i++) if ((($i - $(i+3)) ^ 2) > 1e-10) exit 1 }'
