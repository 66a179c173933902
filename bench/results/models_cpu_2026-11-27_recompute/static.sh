#!/bin/bash
# What the recompute changes without running anything: each training row's arena (kiln
# inspect of the artifact) for CUDA and the CPU, f32 and bf16, before (OLD) and after (NEW);
# and the bytes the kernels of GPT-2's training step read and write (the default pipeline's
# program, summed by step_bytes.py from the steps' inputs and outputs).
OLD=${OLD:-/tmp/sweepbin/kiln} NEW=${NEW:-/tmp/newbin/kiln} ROWS=${ROWS:-/tmp/mexp}
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$ROWS"
for m in gpt2_block_train mlp_train cnn_train gpt2_block bert_layer; do
  for t in cuda cpu; do
    for p in f32 bf16; do
      for which in old new; do
        b=$OLD; [ $which = new ] && b=$NEW
        $b compile $m.kir --weights $m.safetensors --target=$t --precision=$p -o /tmp/static_$which.kiln >/dev/null 2>&1 || { echo "$m $t $p $which: compile failed"; continue; }
        echo "$m $t $p $which $($NEW inspect /tmp/static_$which.kiln | grep -E '^arena:') steps $($NEW inspect /tmp/static_$which.kiln | grep -E '^steps:' | awk '{print $2}')"
      done
    done
  done
done
for which in old new; do
  b=$OLD; [ $which = new ] && b=$NEW
  $b opt gpt2_block_train.kir --pipeline=default > /tmp/static_program_$which.txt 2>/dev/null
  echo "gpt2_block_train default pipeline $which: $(python3 "$HERE/step_bytes.py" /tmp/static_program_$which.txt)"
done
for m in gpt2_block_train mlp_train cnn_train; do
  for p in f32 bf16; do
    passes='decompose,canonicalize,cse,dce,fusion'
    [ $p = bf16 ] && passes='decompose,autocast{precision=bf16},canonicalize,cse,dce,fusion'
    for which in old new; do
      b=$OLD; [ $which = new ] && b=$NEW
      $b opt $m.kir --passes="$passes" > /tmp/static_program_$which.txt 2>/dev/null
      echo "$m $p fused program $which: $(python3 "$HERE/step_bytes.py" /tmp/static_program_$which.txt)"
    done
  done
done
