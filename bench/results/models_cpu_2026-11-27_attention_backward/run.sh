#!/bin/bash
# run.sh OLD_KILN NEW_KILN: GPT-2's f32 training step (kiln bench --suite=models --export) compiled by each, timed alternately.
OLD=$1; NEW=$2; ROWS=${ROWS:-/tmp/mexp}
$OLD compile $ROWS/gpt2_block_train.kir --weights $ROWS/gpt2_block_train.safetensors -o /tmp/old.kiln > /dev/null
$NEW compile $ROWS/gpt2_block_train.kir --weights $ROWS/gpt2_block_train.safetensors -o /tmp/new.kiln > /dev/null
for r in 1 2 3; do
  echo "round $r old: $($OLD bench /tmp/old.kiln --repeat=5 --warmup=2 2>/dev/null | grep -m1 latency)"
  echo "round $r new: $($NEW bench /tmp/new.kiln --repeat=5 --warmup=2 2>/dev/null | grep -m1 latency)"
done
