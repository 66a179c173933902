#!/usr/bin/env bash
# Device call 1 (H200, 2026-11-27, at 3220c3d: the bundle of tools/gpu_bundle.sh built at
# 19adaf7, whose CUDA code generation is 3220c3d's): ncu on the bf16 GPT-2 training step's
# slowest memory-bound kernels, and on the fusion suite's bf16 softmax and chain rows.
# Run from the repository root with gpu/kiln-gpu.tar.xz (the bundle, less fashion_mnist,
# lt_compare and cuda_gpu_test, so that it fits the device call's 64 MiB).
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
tar -xJf gpu/kiln-gpu.tar.xz -C /tmp
K=/tmp/kiln-gpu; W=/tmp/w; mkdir -p $W
nvrtc=$(dirname "$(readlink -f /usr/local/cuda/lib64/libnvrtc.so.13 2>/dev/null || find / -name 'libnvrtc.so.1[23]' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$K/lib:$nvrtc KILN_CACHE_DIR=/tmp/kiln-cache
cd $K
{ date; nvidia-smi -L; } > $O/log.txt 2>&1
bin/kiln bench --suite=models --export=$W/rows > /dev/null 2>&1
bin/kiln bench --suite=fusion --export=$W/fusion > /dev/null 2>&1; ls $W/fusion >> $O/log.txt 2>&1
R="$W/rows/gpt2_block_train.kir --weights $W/rows/gpt2_block_train.safetensors --target=cuda --precision=bf16"
timeout 60 bin/kiln bench $R --repeat=5 --warmup=2 --profile > $O/profile_bf16.txt 2>&1; echo "profile rc=$?" >> $O/log.txt
S="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section InstructionStats"
timeout 150 ncu --clock-control none $S -k 'regex:^kiln_(fused_19|fused_50|fused_34|fused_34_partial|fused_53|fused_40|transpose_10|cast_4|fused_25|fused_7|fused_28)$' -c 11 \
  bin/kiln bench $R --repeat=1 --warmup=0 --profile > $O/ncu_train_bf16.txt 2>&1; echo "ncu rc=$?" >> $O/log.txt
for f in softmax_4096 chain8; do if [ -f $W/fusion/$f.kir ]; then
  timeout 40 ncu --clock-control none $S -c 3 bin/kiln bench $W/fusion/$f.kir --target=cuda --precision=bf16 --repeat=1 --warmup=0 --profile > $O/ncu_${f}_bf16.txt 2>&1; echo "ncu $f rc=$?" >> $O/log.txt
fi; done
