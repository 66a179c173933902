#!/usr/bin/env bash
# Final figures of the session, run one after another on the otherwise idle VM.
set -u
W=/work/main
R=$W/bench/results/fashion_mnist_cpu_2026-11-23
M=$W/bench/results/models_cpu_2026-11-23_cnn
cd /tmp
for i in 1 2; do
  /tmp/fm_final --epochs=1 --threads=2 --out=/tmp/fm_t > $R/epoch_time/kiln_run$i.txt 2>&1
  /tmp/torchenv/bin/python $W/bench/fashion_mnist_torch.py --epochs 1 --threads 2 > $R/epoch_time/torch_run$i.txt 2>&1
done
/tmp/kiln_final bench --suite=models --filter='^(resnet18|cnn_train)$' --threads=2 --repeat=10 --json $M/kiln.json > $M/kiln.txt 2>&1
/tmp/torchenv/bin/python $W/bench/compare_torch.py $M/kiln.json -o $M/merged.json --device cpu > $M/torch.txt 2>&1
/tmp/fm_final --epochs=5 --threads=2 --out=/tmp/fm_full > $R/kiln_5_epochs.txt 2>&1
bazel-out/k8-opt/bin/examples/fashion_mnist_classify /tmp/fm_full/fashion_mnist.kiln  # (rerun after building it: the copy in /tmp was stale, format 1.4)
/tmp/fmc_final /tmp/fm_full/fashion_mnist.kiln > $R/kiln_classify.txt 2>&1
echo done > /tmp/measure.done
