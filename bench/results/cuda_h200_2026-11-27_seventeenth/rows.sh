#!/usr/bin/env bash
# Row kernels: threads per row (items per thread) and launch bounds, two alternating rounds.
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; R=$(pwd)/gpu/rows
tar -xJf gpu/kiln-gpu.tar.xz -C /tmp; K=/tmp/kiln-gpu
nvrtc=$(dirname "$(readlink -f /usr/local/cuda/lib64/libnvrtc.so.13 2>/dev/null || find / -name 'libnvrtc.so.1[23]' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$K/lib:$nvrtc KILN_CACHE_DIR=/tmp/kiln-cache
L=$O/rows.txt; { date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > $L
for round in 1 2; do
  for f in $R/*.kiln; do
    timeout 20 $K/bin/kiln bench $f --target=cuda --repeat=30 --profile > /tmp/b.txt 2>&1
    echo "$round $(basename $f .kiln) rc=$? $(grep -E '^ +0 +' /tmp/b.txt | tr -s ' ') | $(grep -E '^plain copy' /tmp/b.txt)" >> $L
  done
done
date >> $L; cat $L
