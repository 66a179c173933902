#!/bin/bash
# Files 13, 16 and 17 of this directory. K_BASE: the session's first build (323edc5);
# K_PAGES: with huge pages (1a0e1d3... see README); K_ROWS: the last build.
set -x
R=/tmp/res
date -u
# 13: ResNet-18 and ResNet-50, kiln bench latency medians, the first build and the last alternately.
for i in 1 2 3 4 5 6; do
  for m in resnet18 resnet50; do
    a=$(/tmp/kiln_base bench /tmp/$m.base.kiln --threads=2 --repeat=30 2>&1 | grep -E "^latency" | awk '{print $8}')
    b=$(/tmp/kiln_rt bench /tmp/$m.rt.kiln --threads=2 --repeat=30 2>&1 | grep -E "^latency" | awk '{print $8}')
    echo "$m $a $b" | awk '{printf "%s before %s ms after %s ms before/after %.3f\n",$1,$2,$3,$2/$3}'
  done
done > $R/13_resnet_pairs.txt
# 16: a oneDNN convolution timed alone (weights in cache) and after a 64 MiB write (cold).
g++ -O2 -std=c++17 $R/conv_cold.cc -ldnnl -o /tmp/conv_cold
for shape in "256 1024 14" "1024 256 14" "512 2048 7" "2048 512 7" "512 512 7 3"; do
  echo "== ic oc hw [k]: $shape, warm"; OMP_NUM_THREADS=2 /tmp/conv_cold $shape
  echo "== ic oc hw [k]: $shape, cold"; COLD=1 OMP_NUM_THREADS=2 /tmp/conv_cold $shape
done > $R/16_conv_cold_warm.txt 2>&1
# 17: softmax over [12, n, n] rows, kiln bench --profile, the huge-pages build (before the
# row change) and the last build alternately, 3 times each.
for n in 49 51 52 100 128 176 192 197 200 208 216 240 256; do
  sed "s/192/$n/g" $R/softmax_rows.kir > /tmp/sm_$n.kir
  line="$n:"
  for k in final rt final rt final rt; do
    line="$line $k=$(/tmp/kiln_$k bench /tmp/sm_$n.kir --threads=2 --repeat=300 --profile 2>&1 | awk '$1=="0" {print $4}')"
  done
  echo "$line"
done > $R/17_softmax_rows.txt
date -u
