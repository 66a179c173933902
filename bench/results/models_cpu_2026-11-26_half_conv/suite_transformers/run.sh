#!/bin/sh
# The transformer rows in bf16 and f16 with this session's final build (autocast's casts at
# arguments and param copies, f16 matmuls widened once), beside torch.compile under
# torch.autocast; run from the repository root.
K=${K:-bazel-bin/tools/kiln}
D=bench/results/models_cpu_2026-11-26_half_conv/suite_transformers
for p in bf16 f16; do
  $K bench --suite=models --filter='gpt2_block|bert_layer|mlp_train' --precision=$p --json $D/$p.json > $D/$p.txt 2> $D/$p.err
  /tmp/torchenv/bin/python bench/compare_torch.py $D/$p.json -o $D/${p}_torch.json > $D/${p}_torch.txt 2>&1
done
