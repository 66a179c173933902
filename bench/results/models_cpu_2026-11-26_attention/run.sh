#!/bin/bash
# Attention as one CPU step: BEFORE (the same source, fusion{attention=false}) against AFTER.
# BEFORE is /tmp/ab/kiln_before: `KILN_AB_NO_ATTENTION=1 exec /tmp/ab/kiln "$@"`, a build of
# this commit's tree whose compile.cc read that variable to leave attention off (not
# committed); its runtime runs the artifacts without attention steps with the same code.
set -x
cd /work/main
R=bench/results/models_cpu_2026-11-26_attention
BEFORE=/tmp/ab/kiln_before
AFTER=/tmp/ab/kiln_new
date -u
# ONNX exports with attention (BERT-base, GPT-2 small, ViT-B/16), beside ONNX Runtime.
/tmp/torchenv/bin/python bench/onnx_models_ab.py /tmp/models --before $BEFORE --after $AFTER --models bert_base,gpt2_small,vit_b_16 --rounds 3 --json $R/onnx_ab.json > $R/onnx_ab.txt 2>&1
# AFTER's outputs against ONNX Runtime's (max relative error), and its time beside it.
/tmp/torchenv/bin/python bench/onnx_models.py /tmp/models --kiln $AFTER --models bert_base,gpt2_small,vit_b_16 --rounds 1 --json $R/three_models.json > $R/three_models.txt 2>&1
# Profiles of the suite's two transformer rows (kiln bench --suite=models --export=/tmp/suite).
for round in 1 2 3; do
  for b in before after; do
    K=$BEFORE; [ $b = after ] && K=$AFTER
    for row in bert_layer gpt2_block; do
      $K compile /tmp/suite/$row.kir --weights=/tmp/suite/$row.safetensors --target=cpu -o /tmp/ab/${row}_$b.kiln > /dev/null
      $K bench /tmp/ab/${row}_$b.kiln --profile --threads=2 --repeat=10 > $R/profile_${row}_${b}_$round.txt 2>&1
    done
  done
done
# The models suite, both builds alternately, then torch.compile beside AFTER's second run.
for round in 1 2; do
  $BEFORE bench --suite=models --threads=2 --repeat=5 --json $R/models_before_$round.json > $R/models_before_$round.txt 2>&1
  $AFTER bench --suite=models --threads=2 --repeat=5 --json $R/models_after_$round.json > $R/models_after_$round.txt 2>&1
done
/tmp/torchenv/bin/python bench/compare_torch.py $R/models_after_2.json --repeat=15 -o $R/models_after_torch.json > $R/models_after_torch.txt 2>&1
date -u
