#!/bin/bash
# CPU A/B of gpt2_block_train: 1108f75 (before) vs this change (after), alternating, 3 rounds.
export LD_LIBRARY_PATH=/tmp/kb_old/kiln-gpu/lib
for r in 1 2 3; do
  /tmp/kb_old/kiln-gpu/bin/kiln bench /tmp/rows/gpt2_block_train.kir --weights /tmp/rows/gpt2_block_train.safetensors --threads=2 --repeat=10 --warmup=2 --json before_$r.json > before_$r.txt 2>&1
  /tmp/kiln_new bench /tmp/rows2/gpt2_block_train.kir --weights /tmp/rows2/gpt2_block_train.safetensors --threads=2 --repeat=10 --warmup=2 --json after_$r.json > after_$r.txt 2>&1
done
/tmp/kb_old/kiln-gpu/bin/kiln bench /tmp/rows/gpt2_block_train.kir --weights /tmp/rows/gpt2_block_train.safetensors --threads=2 --repeat=5 --warmup=1 --profile > profile_before.txt 2>&1
/tmp/kiln_new bench /tmp/rows2/gpt2_block_train.kir --weights /tmp/rows2/gpt2_block_train.safetensors --threads=2 --repeat=5 --warmup=1 --profile > profile_after.txt 2>&1
echo done > done.txt
