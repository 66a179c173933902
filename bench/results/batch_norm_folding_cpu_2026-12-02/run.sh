#!/usr/bin/env bash
# ResNet-18 of the models suite (batch 16, 224x224) on the CPU, f32 and bf16: OLD (78cd068,
# its batch norms three per-channel post-ops of each convolution) and NEW (this session's,
# folded into the convolutions' weights and bias), each compiling and running its own
# artifact, five alternating rounds of `kiln bench ART --repeat=10`.
# Usage: OLD=path/to/kiln NEW=path/to/kiln run.sh OUTDIR
set -euo pipefail
out=$1; mkdir -p "$out"
"$NEW" bench --suite=models --export="$out/rows" > /dev/null
for p in f32 bf16; do
  for w in old new; do
    b=$NEW; [ $w = old ] && b=$OLD
    "$b" compile "$out/rows/resnet18.kir" --weights "$out/rows/resnet18.safetensors" --precision=$p -o "$out/${w}_$p.kiln" > /dev/null
  done
done
for r in 1 2 3 4 5; do
  for p in bf16 f32; do
    for w in old new; do
      b=$NEW; [ $w = old ] && b=$OLD
      "$b" bench "$out/${w}_$p.kiln" --repeat=10 > "$out/r_${p}_${w}_$r.txt" 2>&1
      echo "$r $p $w $(grep -E '^latency' "$out/r_${p}_${w}_$r.txt" | grep -oE 'median [0-9.]+ ms')"
    done
  done
done
"$NEW" bench "$out/new_bf16.kiln" --repeat=10 --profile > "$out/profile_new_bf16.txt" 2>&1
"$OLD" bench "$out/old_bf16.kiln" --repeat=10 --profile > "$out/profile_old_bf16.txt" 2>&1
rm -rf "$out/rows" "$out"/*.kiln
