#!/bin/bash
# Files 19 (second part), 20 and 21 of this directory.
R=/work/main/bench/results/onnx_models_cpu_2026-11-25_pages_rows
# 19: mlp_train profiled by the last build (the suite's row, exported with kiln bench --suite=models --export=/tmp/rows).
/tmp/kiln_rt bench /tmp/rows/mlp_train.kir --weights /tmp/rows/mlp_train.safetensors --threads=2 --repeat=200 --warmup=20 --profile > $R/19_profile_mlp_train_rows.txt 2>&1
# 20: the first build's ResNet-50 with glibc's malloc on 4 KiB pages and advised onto huge pages, alternately.
for i in 1 2 3 4 5 6; do
  a=$(GLIBC_TUNABLES=glibc.malloc.hugetlb=0 /tmp/kiln_base bench /tmp/resnet50.base.kiln --threads=2 --repeat=30 2>&1 | grep -E "^latency" | awk '{print $8}')
  b=$(GLIBC_TUNABLES=glibc.malloc.hugetlb=1 /tmp/kiln_base bench /tmp/resnet50.base.kiln --threads=2 --repeat=30 2>&1 | grep -E "^latency" | awk '{print $8}')
  echo "$a $b" | awk '{printf "hugetlb=0 %s ms hugetlb=1 %s ms ratio %.3f\n",$1,$2,$1/$2}'
done > $R/20_glibc_hugetlb_resnet50.txt
# 21: ResNet-50's steps (the last build) beside ONNX Runtime's nodes (ort_nodes.py: per-node medians of 15 profiled runs).
/tmp/kiln_rt bench /tmp/resnet50.rt.kiln --profile --threads=2 --repeat=30 > $R/21_resnet50_kiln_profile.txt 2>&1
/tmp/torchenv/bin/python $R/ort_nodes.py /tmp/models/resnet50.onnx > $R/21_resnet50_ort_nodes.txt 2>&1
