#!/bin/bash
# Per-step medians of `kiln bench --profile` (2 threads), the old binary's artifact and the
# new one's in turn, ROUNDS rounds; then the loop steps whose time differs by over 20%.
#   profile_steps.sh OLD NEW ZOO_DIR MODEL > profile_MODEL.txt
set -e
old=$1 new=$2 zoo=$3 m=$4
work=$(mktemp -d)
inputs=$(/tmp/tvenv/bin/python3 - "$zoo/$m.inputs.npz" "$work" <<'PY'
import sys, re, numpy as np
d = np.load(sys.argv[1])
print(" ".join(f"--input {re.sub(r'[^A-Za-z0-9_.]', '_', n)}={sys.argv[2]}/{n}.npy" for n in d.files))
for n in d.files:
    np.save(f"{sys.argv[2]}/{n}.npy", d[n])
PY
)
for side in old new; do ${!side} compile "$zoo/$m.onnx" -o "$work/$side.kiln" > /dev/null; done
for r in $(seq ${ROUNDS:-3}); do
  for side in old new; do
    ${!side} bench "$work/$side.kiln" $inputs --threads=2 --repeat=${REPEAT:-50} --profile 2>/dev/null |
      grep -E "^ +[0-9]+ " > "$work/$side.$r.prof"
  done
done
/tmp/tvenv/bin/python3 - "$work" "${ROUNDS:-3}" "$m" <<'PY'
import sys, statistics
work, rounds, model = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def steps(side):
    per = {}
    for r in range(1, rounds + 1):
        for line in open(f"{work}/{side}.{r}.prof"):
            f = line.split()
            per.setdefault(f[1], []).append((float(f[3]), f[2], " ".join(f[8:])[:70]))
    return per
old, new = steps("old"), steps("new")
print(f"{model}: per-step median over {rounds} rounds (ms), loop steps that differ by over 20%")
total_old = total_new = 0.0
for name in old:
    o = statistics.median(x[0] for x in old[name]); n = statistics.median(x[0] for x in new[name])
    if old[name][0][1] != "loop":
        continue
    total_old += o; total_new += n
    if o > 0.002 and (n > 1.2 * o or n < o / 1.2):
        print(f"  {name:12s} old {o:.4f} new {n:.4f} new/old {n / o:.2f}  {old[name][0][2]}")
print(f"  all loop steps: old {total_old:.3f} new {total_new:.3f} new/old {total_new / total_old:.2f}")
PY
rm -rf "$work"
