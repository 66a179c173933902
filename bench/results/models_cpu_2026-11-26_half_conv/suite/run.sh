#!/bin/sh
# The models suite's convolutional rows with this change beside torch.compile on the
# 2-core VM, f32 and bf16 (PyTorch under torch.autocast(bfloat16) for the bf16 rows).
# Run from the repository root; K is the kiln binary (bazel build -c opt //tools:kiln).
K=${K:-bazel-bin/tools/kiln}
D=bench/results/models_cpu_2026-11-26_half_conv/suite
$K bench --suite=models --filter='resnet18|cnn_train' --json $D/f32.json > $D/f32.txt 2> $D/f32.err
/tmp/torchenv/bin/python bench/compare_torch.py $D/f32.json -o $D/f32_torch.json > $D/f32_torch.txt 2>&1
$K bench --suite=models --filter='resnet18|cnn_train' --precision=bf16 --json $D/bf16.json > $D/bf16.txt 2> $D/bf16.err
/tmp/torchenv/bin/python bench/compare_torch.py $D/bf16.json -o $D/bf16_torch.json > $D/bf16_torch.txt 2>&1
