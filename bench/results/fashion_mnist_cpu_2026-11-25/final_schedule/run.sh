#!/usr/bin/env bash
# One epoch each of kiln (at 99ed90c: standardized pixels, Adam lr 3e-3 with cosine decay)
# and bench/fashion_mnist_torch.py (the same schedule), in turn, twice, on the idle VM.
set -u
W=/work/main
R=$W/bench/results/fashion_mnist_cpu_2026-11-25/final_schedule
PY=${PY:-/tmp/torchenv/bin/python}
cd /tmp
for i in ${ROUNDS:-1 2}; do
  $W/bazel-out/k8-opt/bin/examples/fashion_mnist --epochs=1 --threads=2 --out=/tmp/fm_t > $R/kiln_epoch_run$i.txt 2>&1
  $PY $W/bench/fashion_mnist_torch.py --epochs 1 --threads 2 > $R/torch_epoch_run$i.txt 2>&1
done
