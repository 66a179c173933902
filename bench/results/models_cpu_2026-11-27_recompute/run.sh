#!/bin/bash
# The models suite's training rows on the 2-core VM's CPU, before (a75c0c2) and after
# (this session's recompute of read-back values), alternating, two rounds; then one
# profile of GPT-2's f32 training step with each. OLD and NEW are the two kiln binaries
# (bazel build -c opt //tools:kiln at each commit); the rows are
# `kiln bench --suite=models --export=DIR`'s .kir files.
OLD=${OLD:-/tmp/sweepbin/kiln} NEW=${NEW:-/tmp/newbin/kiln} ROWS=${ROWS:-/tmp/mexp}
OUT=$(cd "$(dirname "$0")" && pwd)
cd "$ROWS"
for round in 1 2; do
  for m in gpt2_block_train mlp_train cnn_train; do
    for prec in f32 bf16; do
      for which in old new; do
        b=$OLD; [ $which = new ] && b=$NEW
        r=20; [ $m = gpt2_block_train ] && r=5
        $b bench $m.kir --random-weights --precision=$prec --repeat=$r --warmup=2 2>/dev/null | grep -E "^latency" |
          sed "s/^/$round $m $prec $which /"
      done
    done
  done
done
for which in old new; do
  b=$OLD; [ $which = new ] && b=$NEW
  $b bench gpt2_block_train.kir --random-weights --repeat=3 --warmup=1 --profile 2>/dev/null > "$OUT/profile_gpt2_block_train_f32_$which.txt"
done
