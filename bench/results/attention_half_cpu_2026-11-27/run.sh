#!/bin/bash
# GPT-2's bf16 and f16 training step (and the bf16 forward rows) on the 2-core VM's CPU
# (Intel Xeon with AMX-BF16 and AVX512-BF16, 480 MiB L3), before (9ddee43: the attention
# backward decomposed in half precision) and after (9a845f8: one step, products dense for
# oneDNN's AMX kernels). OLD and NEW: `bazel build -c opt //tools:kiln` at each commit;
# ROWS: `kiln bench --suite=models --export=DIR`. Each artifact is compiled by its own
# kiln and timed by NEW (the runtime of the decomposed steps is the same code in both).
OLD=${OLD:-/tmp/oldbin/kiln} NEW=${NEW:-/tmp/newbin/kiln} ROWS=${ROWS:-/tmp/mexp}
OUT=$(cd "$(dirname "$0")" && pwd)
cd "$ROWS"
for p in bf16 f16; do
  $OLD compile gpt2_block_train.kir --precision=$p -o /tmp/old_$p.kiln > /dev/null
  $NEW compile gpt2_block_train.kir --precision=$p -o /tmp/new_$p.kiln > /dev/null
done
for f in old_bf16 new_bf16 old_f16 new_f16; do
  echo "$f $($NEW inspect /tmp/$f.kiln --no-ir | grep -i arena | head -1)"
done > "$OUT/arenas.txt"
for round in 1 2 3; do
  for p in bf16 f16; do
    for w in old new; do
      echo "$round $p $w $($NEW bench /tmp/${w}_$p.kiln --repeat=10 --warmup=2 2>/dev/null | grep -E '^latency')"
    done
  done
done > "$OUT/latency_final.txt"
$NEW bench /tmp/old_bf16.kiln --repeat=5 --warmup=1 --profile > "$OUT/profile_gpt2_block_train_bf16_old.txt" 2>/dev/null
$NEW bench /tmp/new_bf16.kiln --repeat=5 --warmup=1 --profile > "$OUT/profile_gpt2_block_train_bf16_new.txt" 2>/dev/null
# The forward rows (inference: attention was one step before too), each binary on its own artifact.
$OLD compile gpt2_block.kir --weights=gpt2_block.safetensors --precision=bf16 -o /tmp/fwd_bf16_old.kiln > /dev/null
$NEW compile gpt2_block.kir --weights=gpt2_block.safetensors --precision=bf16 -o /tmp/fwd_bf16.kiln > /dev/null
$OLD compile bert_layer.kir --weights=bert_layer.safetensors --precision=bf16 -o /tmp/bert_old.kiln > /dev/null
$NEW compile bert_layer.kir --weights=bert_layer.safetensors --precision=bf16 -o /tmp/bert_new.kiln > /dev/null
for r in 1 2 3; do
  for m in fwd bert; do
    for b in old new; do
      bin=$NEW; [ $b = old ] && bin=$OLD
      f=/tmp/fwd_bf16.kiln; [ $b = old ] && f=/tmp/fwd_bf16_old.kiln; [ $m = bert ] && f=/tmp/bert_$b.kiln
      echo "$r $m $b $($bin bench $f --repeat=20 --warmup=2 --profile 2>/dev/null | grep -E '^latency|attention_' | cut -c1-64 | tr '\n' ' ')"
    done
  done
done > "$OUT/forward_bf16_gpt2_bert.txt"
