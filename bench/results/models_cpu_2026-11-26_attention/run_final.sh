#!/bin/bash
# The final build (FINAL, /tmp/ab/kiln_final: attention also writes its result with the
# heads merged back, through out_strides) against BEFORE, after run.sh.
set -x
cd /work/main
R=bench/results/models_cpu_2026-11-26_attention
BEFORE=/tmp/ab/kiln_before
FINAL=/tmp/ab/kiln_final
date -u
/tmp/torchenv/bin/python bench/onnx_models.py /tmp/models --kiln $FINAL --models bert_base,gpt2_small,vit_b_16 --rounds 1 --json $R/three_models_final.json > $R/three_models_final.txt 2>&1
for round in 1 2 3; do
  for b in before final; do
    K=$BEFORE; [ $b = final ] && K=$FINAL
    for row in bert_layer gpt2_block; do
      $K compile /tmp/suite/$row.kir --weights=/tmp/suite/$row.safetensors --target=cpu -o /tmp/ab/${row}_$b.kiln > /dev/null
      $K bench /tmp/ab/${row}_$b.kiln --profile --threads=2 --repeat=10 > $R/profile_${row}_${b}_$round.txt 2>&1
    done
  done
done
/tmp/torchenv/bin/python bench/onnx_models_ab.py /tmp/models --before $BEFORE --after $FINAL --models bert_base,gpt2_small,vit_b_16 --rounds 3 --json $R/onnx_ab_final.json > $R/onnx_ab_final.txt 2>&1
$FINAL bench --suite=models --threads=2 --repeat=5 --json $R/models_final.json > $R/models_final.txt 2>&1
/tmp/torchenv/bin/python bench/compare_torch.py $R/models_final.json --repeat=15 -o $R/models_final_torch.json > $R/models_final_torch.txt 2>&1
date -u
