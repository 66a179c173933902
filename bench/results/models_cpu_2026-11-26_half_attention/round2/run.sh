#!/bin/sh
# Second round (AVX-512 rows, blocks of up to 128 rows in half precision): kiln_base is
# 263ca81, kiln_v4 this change; alternating, outputs in ab2/.
for i in 1 2 3; do for b in base v4; do
  ./kiln_$b bench models/gpt2_block.kir --weights models/gpt2_block.safetensors --precision=bf16 --profile --repeat=10 > ab2/gpt2_bf16_${b}_$i.txt 2>&1
done; done
for i in 1 2; do for b in base v4; do
  ./kiln_$b bench models/gpt2_block.kir --weights models/gpt2_block.safetensors --precision=f16 --profile --repeat=5 > ab2/gpt2_f16_${b}_$i.txt 2>&1
  ./kiln_$b bench models/bert_layer.kir --weights models/bert_layer.safetensors --precision=bf16 --profile --repeat=10 > ab2/bert_bf16_${b}_$i.txt 2>&1
  ./kiln_$b bench models/gpt2_block.kir --weights models/gpt2_block.safetensors --profile --repeat=5 > ab2/gpt2_f32_${b}_$i.txt 2>&1
  ./kiln_$b bench models/bert_layer.kir --weights models/bert_layer.safetensors --profile --repeat=10 > ab2/bert_f32_${b}_$i.txt 2>&1
done; done
