#!/usr/bin/env bash
# The first convolution's result channel-blocked: before (365c6c5, /tmp/kiln_head and
# /tmp/fm_head, built from a stash) and after, in turn, twice, on the idle VM.
set -u
W=/work/main
M=$W/bench/results/models_cpu_2026-11-25_blocked_first_conv
for i in 1 2; do
  /tmp/kiln_head bench --suite=models --filter='^(resnet18|cnn_train)$' --threads=2 --repeat=10 > $M/models_before_run$i.txt 2>&1
  $W/bazel-out/k8-opt/bin/tools/kiln bench --suite=models --filter='^(resnet18|cnn_train)$' --threads=2 --repeat=10 > $M/models_after_run$i.txt 2>&1
done
cd /tmp
for i in 1 2; do
  /tmp/fm_head --epochs=1 --threads=2 --out=/tmp/fm_b > $M/kiln_before_epoch_run$i.txt 2>&1
  $W/bazel-out/k8-opt/bin/examples/fashion_mnist --epochs=1 --threads=2 --out=/tmp/fm_t > $M/kiln_after_epoch_run$i.txt 2>&1
  /tmp/torchenv/bin/python $W/bench/fashion_mnist_torch.py --epochs 1 --threads 2 > $M/torch_epoch_run$i.txt 2>&1
done
