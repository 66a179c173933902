#!/usr/bin/env bash
# One epoch each of: kiln before this change (1716f33, built from a stash into /tmp/fm_base),
# kiln after, PyTorch eager; twice, in turn, on the otherwise idle 2-core VM. Then the
# training step alone, before and after (kiln bench --profile on the step each binary
# dumps with --dump-ir), twice in turn.
set -u
W=/work/main
R=$W/bench/results/fashion_mnist_cpu_2026-11-25
B=$W/bazel-out/k8-opt/bin
PY=${PY:-/tmp/torchenv/bin/python}
cd /tmp
for i in 1 2; do
  /tmp/fm_base --epochs=1 --threads=2 --out=/tmp/fm_b > $R/kiln_before_epoch_run$i.txt 2>&1
  $B/examples/fashion_mnist --epochs=1 --threads=2 --out=/tmp/fm_t > $R/kiln_after_epoch_run$i.txt 2>&1
  $PY $W/bench/fashion_mnist_torch.py --epochs 1 --threads 2 > $R/torch_epoch_run$i.txt 2>&1
done
for i in 1 2; do
  /tmp/kiln_base bench $R/train_step_before.kir --profile --threads=2 --repeat=30 > $R/step_before_run$i.txt 2>&1
  $B/tools/kiln bench $R/train_step_after.kir --profile --threads=2 --repeat=30 > $R/step_after_run$i.txt 2>&1
done
