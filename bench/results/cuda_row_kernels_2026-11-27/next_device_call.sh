#!/usr/bin/env bash
# The device call this session prepared and could not make (no machine was lent after the
# first call). Run from the repository root with gpu/kiln-gpu.tar.xz (tools/gpu_bundle.sh's
# bundle less fashion_mnist and lt_compare, repacked with xz -9e to fit the call's 64 MiB) and
# gpu/kiln-base.xz (the kiln binary of the bundle built at 19adaf7). One device call (H200):
# the GPU tier but its four longest cases (with the bf16/f16 attention backward's, 2026-12-02), then the models before
# (bin/kiln-base, built at 19adaf7) and after this session's row-kernel changes, alternating,
# two rounds, each with --profile; the models beside torch.compile; ncu of the softmax
# kernels; the fusion suite before and after and the every-op case while time is left.
set -u
O=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p "$O" "$W"
root=$(pwd); start=$SECONDS
left() { echo $(( ${BUDGET:-540} - (SECONDS - start) )); }
tar -xJf gpu/kiln-gpu.tar.xz -C /tmp
K=/tmp/kiln-gpu
xz -dc gpu/kiln-base.xz > $K/bin/kiln-base && chmod +x $K/bin/kiln-base
nvrtc=$(dirname "$(readlink -f /usr/local/cuda/lib64/libnvrtc.so.13 2>/dev/null || find / -name 'libnvrtc.so.1[23]' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$K/lib:$nvrtc KILN_CACHE_DIR=/tmp/kiln-cache PYTHONUNBUFFERED=1 KILN_CUDA_ATTENTION_BACKWARD=matmuls
L=$O/log.txt
{ date; nvidia-smi -L; git -C "$root" log --oneline -1 2>/dev/null; } > "$L" 2>&1
stage() { echo "== $(date +%T) [$(left) s left] $*" | tee -a "$L"; }
cd $K
stage "GPU tier, less its four longest cases"
KILN_REQUIRE_GPU=1 timeout 150 bin/cuda_gpu_test --durations yes 'CUDA: a bf16 or f16 attention*,CUDA: f32 division*,CUDA: row kernels*,CUDA: split reductions*,CUDA: 30 random graphs*,CUDA: every op in f16 and bf16*,CUDA: graph replay*,CUDA: a result that is a state*,CUDA: state updates*,CUDA: f32 matmuls*,CUDA: cublasLt*,CUDA: f16 and bf16 matmuls*,CUDA: f32 attention as one kernel*,CUDA: an f32 attention*,CUDA: attention kernels give*' \
  > "$O/gpu_tests.txt" 2>&1; echo "tier rc=$?" | tee -a "$L"
grep -E "FAILED|passed|failed" "$O/gpu_tests.txt" | tail -8 >> "$L"
stage "before and after"
bin/kiln bench --suite=models --export="$W/rows" > /dev/null
for round in 1 2; do
  for cfg in "gpt2_block_train bf16" "gpt2_block bf16" "gpt2_block_train f32" "gpt2_block f32" "bert_layer f32" "mlp_train f32"; do
    set -- $cfg
    for which in base new; do
      b=bin/kiln; [ $which = base ] && b=bin/kiln-base
      r="$W/ab_${1}_${2}_${which}_$round.txt"
      timeout 60 $b bench "$W/rows/$1.kir" --weights "$W/rows/$1.safetensors" --target=cuda --precision=$2 --repeat=30 --warmup=5 --profile > "$r" 2>&1
      echo "ab $round $1 $2 $which rc=$? $(grep -E '^latency|^steps' "$r" | tr -s ' ' | tr '\n' ';')" >> "$L"
    done
  done
done
stage "bf16 attention backward: two tensor-core kernels (1.21) against the matmuls, racecheck"
KILN_CUDA_ATTENTION_BACKWARD=kernels KILN_REQUIRE_GPU=1 timeout 90 compute-sanitizer --tool racecheck \
  bin/cuda_gpu_test "CUDA: a bf16 or f16 attention's backward*" > "$O/racecheck_backward.txt" 2>&1; echo "racecheck rc=$?" >> "$L"
tail -3 "$O/racecheck_backward.txt" >> "$L"
for kir in cuda_checks/train_attention_*.kir; do
  row=$(basename "$kir" .kir)
  bin/kiln opt "$kir" --passes='autodiff{wrt=q,k,v}' > "$W/$row.grad.kir"
  for backward in matmuls kernels matmuls kernels; do
    r="$W/${row}_$backward.txt"
    KILN_CUDA_ATTENTION_BACKWARD=$backward timeout 60 bin/kiln bench "$W/$row.grad.kir" --target=cuda --precision=bf16 --repeat=10 --warmup=2 --profile > "$r" 2>&1
    echo "bwd $row $backward rc=$? $(grep -E '^latency|^steps|^ +[0-9]+ +attention' "$r" | tr -s ' ' | tr '\n' ';')" >> "$L"
  done
done
for backward in matmuls kernels matmuls kernels; do
  r="$W/gpt2_block_train_bf16_$backward.txt"
  KILN_CUDA_ATTENTION_BACKWARD=$backward timeout 60 bin/kiln bench "$W/rows/gpt2_block_train.kir" --weights "$W/rows/gpt2_block_train.safetensors" --target=cuda --precision=bf16 --repeat=30 --warmup=5 --profile > "$r" 2>&1
  echo "bwd gpt2_block_train $backward rc=$? $(grep -E '^latency|^steps|^ +[0-9]+ +attention' "$r" | tr -s ' ' | tr '\n' ';')" >> "$L"
done
stage "models bf16 beside torch.compile"
timeout 100 bin/kiln bench --suite=models --target=cuda --repeat=10 --precision=bf16 --filter='^gpt2_block' --json "$W/models_bf16.json" > "$W/models_bf16.txt" 2> "$W/models_bf16_progress.txt"; echo "rc=$?" >> "$L"
timeout 120 python3 compare_torch.py "$W/models_bf16.json" -o "$W/models_bf16_torch.json" > "$W/models_bf16_torch.txt" 2>&1; echo "compare rc=$?" >> "$L"
grep -E "^row|^[a-z0-9_]+ +[0-9]" "$W/models_bf16_torch.txt" >> "$L"
stage "models f32 beside torch.compile"
timeout 100 bin/kiln bench --suite=models --target=cuda --repeat=10 --filter='^(gpt2_block|bert_layer|mlp_train)' --json "$W/models_f32.json" > "$W/models_f32.txt" 2> "$W/models_f32_progress.txt"; echo "rc=$?" >> "$L"
timeout 150 python3 compare_torch.py "$W/models_f32.json" -o "$W/models_f32_torch.json" > "$W/models_f32_torch.txt" 2>&1; echo "compare rc=$?" >> "$L"
grep -E "^row|^[a-z0-9_]+ +[0-9]" "$W/models_f32_torch.txt" >> "$L"
if [ "$(left)" -gt 60 ]; then
  stage "ncu of the softmax kernels, after"
  S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section InstructionStats"
  R="$W/rows/gpt2_block_train.kir --weights $W/rows/gpt2_block_train.safetensors --target=cuda --precision=bf16"
  timeout 50 ncu --clock-control none $S -k 'regex:^kiln_(fused_19|fused_50|fused_34_partial|fused_40_partial|fused_53)$' -c 5 \
    bin/kiln bench $R --repeat=1 --warmup=0 --profile > "$W/ncu_train_bf16_new.txt" 2>&1; echo "ncu rc=$?" >> "$L"
fi
if [ "$(left)" -gt 150 ]; then
  stage "fusion suite before and after"
  for which in base new; do
    b=bin/kiln; [ $which = base ] && b=bin/kiln-base
    timeout 70 $b bench --suite=fusion --target=cuda > "$W/fusion_$which.txt" 2>&1; echo "fusion $which rc=$?" >> "$L"
  done
fi
if [ "$(left)" -gt 125 ]; then
  stage "every op"
  KILN_REQUIRE_GPU=1 timeout $(( $(left) - 10 )) bin/cuda_gpu_test --durations yes 'CUDA: every op*' '~CUDA: every op in f16*' > "$O/gpu_tests_ops.txt" 2>&1; echo "ops rc=$?" | tee -a "$L"
  grep -E "FAILED|passed|failed" "$O/gpu_tests_ops.txt" | tail -4 >> "$L"
fi
stage done
tar -czf "$O/work.tgz" -C "$W" --exclude=rows .
grep -E "^ab |^bwd |rc=|^==" "$L" | tail -70
