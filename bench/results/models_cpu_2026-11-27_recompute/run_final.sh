#!/bin/bash
# GPT-2's training step on the 2-core VM's CPU before (a75c0c2, OLD) and after (this
# session's last commit, NEW), alternating, two rounds, then one profile each.
OLD=${OLD:-/tmp/sweepbin/kiln} NEW=${NEW:-/tmp/newbin/kiln} ROWS=${ROWS:-/tmp/mexp}
OUT=$(cd "$(dirname "$0")" && pwd)
cd "$ROWS"
for round in 1 2; do
  for prec in f32 bf16; do
    for which in old new; do
      b=$OLD; [ $which = new ] && b=$NEW
      $b bench gpt2_block_train.kir --random-weights --precision=$prec --repeat=5 --warmup=2 2>/dev/null |
        grep -E "^latency" | sed "s/^/$round gpt2_block_train $prec $which /"
    done
  done
done
for prec in f32 bf16; do
  for which in old new; do
    b=$OLD; [ $which = new ] && b=$NEW
    $b bench gpt2_block_train.kir --random-weights --precision=$prec --repeat=3 --warmup=1 --profile 2>/dev/null \
      > "$OUT/profile_gpt2_block_train_${prec}_$which.txt"
  done
done
