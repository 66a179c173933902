#!/bin/bash
# A/B of this session's three changes on the models suite's training rows, CPU.
# OLD, NEW: kiln binaries (OLD = 7147121, NEW = this session's head); ROWS: exported rows
# (kiln bench --suite=models --export=ROWS, by NEW: OLD's suite has no LLaMA rows).
# Each binary compiles each row for itself; rounds alternate OLD and NEW.
set -eu
OLD=$1 NEW=$2 ROWS=$3 OUT=$4 ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"
for m in llama_block_train gpt2_block_train llama_block; do
  for p in f32 bf16; do
    for b in old new; do
      bin=$OLD; [ $b = new ] && bin=$NEW
      "$bin" compile "$ROWS/$m.kir" --weights "$ROWS/$m.safetensors" --precision=$p -o "$OUT/$m.$p.$b.kiln" > /dev/null
    done
  done
done
for r in $(seq 1 "$ROUNDS"); do
  for m in llama_block_train gpt2_block_train llama_block; do
    for p in f32 bf16; do
      for b in old new; do
        bin=$OLD; [ $b = new ] && bin=$NEW
        ms=$("$bin" bench "$OUT/$m.$p.$b.kiln" --repeat=10 --warmup=3 2>/dev/null | sed -n 's/^latency over .*median \([0-9.]*\) ms.*/\1/p')
        echo "round $r $m $p $b $ms" | tee -a "$OUT/rounds.txt"
      done
    done
  done
done
