#!/usr/bin/env bash
# Model rows before (1716f33, /tmp/kiln_base) and after this change, in turn, twice.
set -u
W=/work/main
M=$W/bench/results/models_cpu_2026-11-25_pool
for i in 1 2; do
  /tmp/kiln_base bench --suite=models --filter='^(resnet18|cnn_train|mlp_train|bert_layer|gpt2_block)$' --threads=2 --repeat=10 > $M/before_run$i.txt 2>&1
  $W/bazel-out/k8-opt/bin/tools/kiln bench --suite=models --filter='^(resnet18|cnn_train|mlp_train|bert_layer|gpt2_block)$' --threads=2 --repeat=10 > $M/after_run$i.txt 2>&1
done
