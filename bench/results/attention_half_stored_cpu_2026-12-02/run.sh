#!/usr/bin/env bash
# The attention op's forward and backward with q, k, v and dy stored in bf16 or f16
# (bench/cuda_checks/train_attention_h32_d64_causal.kir at B=1, 8 heads, S=1024), on the
# CPU: OLD (78cd068, whose backward is the decomposition's, since its matcher took only f32
# gradients) and NEW (this session's, one step writing the gradients in the precision),
# each compiling and running its own artifact, three alternating rounds of 20 timed runs.
# Usage: OLD=path/to/kiln NEW=path/to/kiln run.sh OUTDIR
set -euo pipefail
out=$1; mkdir -p "$out"
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
sed 's/\[4,32,4096,64\]/[1,8,1024,64]/g' "$root/bench/cuda_checks/train_attention_h32_d64_causal.kir" > "$out/att_bf16.kir"
sed 's/bf16/f16/g' "$out/att_bf16.kir" > "$out/att_f16.kir"
for p in bf16 f16; do
  "$NEW" opt "$out/att_$p.kir" --passes='autodiff{wrt=q,k,v}' > "$out/grad_$p.kir"
  for w in old new; do
    b=$NEW; [ $w = old ] && b=$OLD
    "$b" compile "$out/grad_$p.kir" --precision=$p -o "$out/${w}_$p.kiln" > /dev/null
    "$b" inspect "$out/${w}_$p.kiln" --no-ir | grep -E "^ +[0-9]+ " > "$out/steps_${w}_$p.txt"
  done
done
for r in 1 2 3; do
  for p in bf16 f16; do
    for w in old new; do
      b=$NEW; [ $w = old ] && b=$OLD
      "$b" bench "$out/${w}_$p.kiln" --repeat=20 > "$out/r_${p}_${w}_$r.txt" 2>&1
      echo "$r $p $w $(grep -E '^latency|^arena' "$out/r_${p}_${w}_$r.txt" | tr -s ' ' | tr '\n' ';' | cut -c1-150)"
    done
  done
done
"$NEW" bench "$out/new_bf16.kiln" --repeat=10 --profile > "$out/profile_new_bf16.txt" 2>&1
"$OLD" bench "$out/old_bf16.kiln" --repeat=10 --profile > "$out/profile_old_bf16.txt" 2>&1
