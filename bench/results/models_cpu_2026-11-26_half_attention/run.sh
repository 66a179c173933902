#!/bin/sh
# Half-precision attention on the 2-core VM (2026-11-26). kiln_base: 263ca81 (half attention
# as three steps); kiln_new: this change. Models exported with
#   kiln bench --suite=models --export=models
# ab/*: alternating runs, gpt2_block in bf16 (3 rounds) and f16 (2), bert_layer in bf16 (2).
for i in 1 2 3; do for b in base new; do
  ./kiln_$b bench models/gpt2_block.kir --weights models/gpt2_block.safetensors --precision=bf16 --profile --repeat=10 > gpt2_bf16_${b}_$i.txt 2>&1
done; done
for i in 1 2; do for b in base new; do
  ./kiln_$b bench models/gpt2_block.kir --weights models/gpt2_block.safetensors --precision=f16 --profile --repeat=5 > gpt2_f16_${b}_$i.txt 2>&1
  ./kiln_$b bench models/bert_layer.kir --weights models/bert_layer.safetensors --precision=bf16 --profile --repeat=10 > bert_bf16_${b}_$i.txt 2>&1
done; done
# attention alone (causal, 12 heads of 64, B*T = 4096 rows), both builds twice, bf16:
for T in 128 256 512 1024; do for b in base new base new; do
  echo "T=$T $b $(./kiln_$b bench attn_$T.kir --precision=bf16 --repeat=10 2>&1 | grep latency)"
done; done > attention_alone.txt
