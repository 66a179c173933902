#!/bin/bash
# Half-precision matmul views on the CPU: BEFORE (/tmp/kiln_inplace, 28e6ccf) against AFTER
# (this change), the models suite's training row in bf16 and f16, alternating.
set -u
for round in 1 2 3; do
  for build in before after; do
    bin=/tmp/kiln_inplace; [ $build = after ] && bin=/tmp/kiln_after
    for p in bf16 f16; do
      $bin bench /tmp/rows/gpt2_block_train.kir --weights=/tmp/rows/gpt2_block_train.safetensors --precision=$p --repeat=5 --warmup=2 > ${build}_${p}_$round.txt 2>&1
      echo "$round $build $p $(grep -o 'median [0-9.]* ms' ${build}_${p}_$round.txt)"
    done
  done
done
