# The commands behind this directory's files: the 2-core development VM (AMD EPYC, 2 hardware threads), kiln at the end of the session (reshape blocks, oneDNN bound to --threads) (bazel build -c opt), f32 matmuls on oneDNN 2.6.3, PyTorch 2.15.0 (CPU wheel, venv, 15 runs per row), 2026-11-23.
#!/bin/bash
# The reduction goals, then the models suite on this machine's CPU, PyTorch beside it, and a profile of every row.
set -x
cd /work/main
K=/work/main/bazel-out/k8-opt/bin/tools/kiln
R=${R:-/tmp/mr7}
mkdir -p $R
date -u
for g in colsum fullsum; do
  $K bench bench/results/models_cpu_2026-11-23_split/$g.kir --repeat=50 --profile > $R/goal_$g.txt 2>&1
done
$K bench --suite=models --repeat=5 --json $R/models_cpu.json > $R/models_cpu.txt 2> $R/models_cpu.progress
/tmp/torchenv/bin/python bench/compare_torch.py $R/models_cpu.json --repeat=15 -o $R/models_cpu_torch.json > $R/models_cpu_torch.txt 2>&1
$K bench --suite=models --export=$R/rows > /dev/null
for row in gpt2_block gpt2_block_train bert_layer mlp_train; do
  $K bench $R/rows/$row.kir --weights $R/rows/$row.safetensors --repeat=5 --warmup=2 --profile --json $R/profile_$row.json --trace $R/trace_$row.json > $R/profile_$row.txt 2>&1
done
date -u
# --precision=bf16 against f32 on the CPU (matmuls widened to f32 for oneDNN's sgemm).
for p in f32 bf16; do
  $K bench $R/rows/gpt2_block.kir --weights $R/rows/gpt2_block.safetensors --repeat=5 --warmup=2 --precision=$p --profile > $R/precision_$p.txt 2>&1
done
date -u
