#!/bin/bash
# Static SASS instructions of each kernel of a row's CUDA program (sm_90), before (OLD)
# and after (NEW): kiln compile --emit=source, nvcc -cubin, cuobjdump -sass (this VM has
# no disassembler of its own: the one in Triton's wheel, `pip download triton`, unzipped).
# Usage: sass_counts.sh ROW.kir PRECISION   (OLD, NEW: kiln binaries; CUOBJDUMP: its path)
set -euo pipefail
row=$1 precision=$2
OLD=${OLD:?} NEW=${NEW:?} CUOBJDUMP=${CUOBJDUMP:-cuobjdump}
tmp=$(mktemp -d)
for which in old new; do
  bin=$OLD; [ $which = new ] && bin=$NEW
  "$bin" compile "$row" --target=cuda --precision="$precision" --emit=source -o "$tmp/$which.cu"
  /usr/local/cuda/bin/nvcc -arch=sm_90 -cubin -Xptxas -v -o "$tmp/$which.cubin" "$tmp/$which.cu" 2> "$tmp/$which.ptxas"
  "$CUOBJDUMP" -sass "$tmp/$which.cubin" > "$tmp/$which.sass"
done
python3 - "$tmp" <<'PY'
import re, sys
tmp = sys.argv[1]
def counts(which):
    n, cur = {}, None
    for line in open(f"{tmp}/{which}.sass"):
        m = re.search(r"Function : (\S+)", line)
        if m: cur = m.group(1); n[cur] = 0
        elif cur and re.match(r"\s+/\*[0-9a-f]{4}\*/", line): n[cur] += 1
    regs, cur = {}, None
    for line in open(f"{tmp}/{which}.ptxas"):
        m = re.search(r"entry function '(\S+)'", line)
        if m: cur = m.group(1)
        m = re.search(r"Used (\d+) registers", line)
        if m and cur: regs[cur] = int(m.group(1))
    return n, regs
old, old_regs = counts("old"); new, new_regs = counts("new")
print(f"{'kernel':32} {'old':>6} {'new':>6} {'regs':>9}")
for k in sorted(old):
    if old[k] != new.get(k) or old_regs.get(k) != new_regs.get(k):
        print(f"{k:32} {old[k]:6} {new.get(k, 0):6} {old_regs.get(k, 0):4}>{new_regs.get(k, 0):<4}")
print(f"{'all kernels':32} {sum(old.values()):6} {sum(new.values()):6}")
PY
rm -rf "$tmp"
