#!/usr/bin/env bash
# One device call: GPU tier, the f32 attention backward's kernels against matmuls, flash
# attention, models f32 and bf16 beside torch.compile, bf16 attention rows, profiles.
set -u
O=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p "$O" "$W"
root=$(pwd)
if [ "${1:-}" != inner ]; then
  tar -xJf gpu/kiln-gpu.tar.xz -C /tmp
  { date; nvidia-smi; git -C "$root" log --oneline -1 2>/dev/null; } > "$O/log.txt" 2>&1
  timeout ${BUDGET:-480} "$root/gpu/device.sh" inner; echo "stages rc=$?" >> "$O/log.txt"
  rm -rf "$W/rows"; tar -czf "$O/work.tgz" -C "$W" .; exit 0
fi
K=/tmp/kiln-gpu
nvrtc=$(dirname "$(readlink -f /usr/local/cuda/lib64/libnvrtc.so.13 2>/dev/null || find / -name 'libnvrtc.so.1[23]' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$K/lib:$nvrtc KILN_CACHE_DIR=/tmp/kiln-cache PYTHONUNBUFFERED=1
L=$O/log.txt
stage() { echo "== $(date +%T) $*" | tee -a "$L"; }
cd $K
stage "GPU tier"
KILN_REQUIRE_GPU=1 timeout 200 bin/cuda_gpu_test --durations yes > "$O/gpu_tests.txt" 2>&1; echo "rc=$?" | tee -a "$L"
grep -E "FAILED|passed|failed|^[0-9.]+ s:" "$O/gpu_tests.txt" | tail -40 >> "$L"
stage "f32 attention backward: kernels against matmuls"
bin/kiln bench --suite=models --export="$W/rows" > /dev/null
timeout 30 bin/kiln opt cuda_checks/train_f32_attention_gpt2.kir --passes='autodiff{wrt=q,k,v}' > "$W/att.grad.kir"
for round in 1 2; do for backward in kernels matmuls; do
  r="$W/train_f32_attention_gpt2_${backward}_$round.txt"
  KILN_CUDA_ATTENTION_BACKWARD=$backward timeout 60 bin/kiln bench "$W/att.grad.kir" --target=cuda --repeat=20 --warmup=3 --profile > "$r" 2>&1
  echo "att $backward $round rc=$? $(grep -E '^latency|^steps|^ +[0-9]+ +attention' "$r" | tr -s ' ' | tr '\n' ';')" >> "$L"
  r="$W/gpt2_block_train_f32_${backward}_$round.txt"
  KILN_CUDA_ATTENTION_BACKWARD=$backward timeout 90 bin/kiln bench "$W/rows/gpt2_block_train.kir" --weights "$W/rows/gpt2_block_train.safetensors" --target=cuda --repeat=20 --warmup=3 --profile > "$r" 2>&1
  echo "gpt2_block_train $backward $round rc=$? $(grep -E '^latency|^steps|^ +[0-9]+ +attention' "$r" | tr -s ' ' | tr '\n' ';')" >> "$L"
done; done
stage "attention_torch.py"
timeout 90 python3 attention_torch.py > "$W/attention_torch.txt" 2>&1; echo "rc=$?" >> "$L"; cat "$W/attention_torch.txt" >> "$L"
stage "models f32"
timeout 120 bin/kiln bench --suite=models --target=cuda --repeat=10 --json "$W/models_f32.json" > "$W/models_f32.txt" 2> "$W/models_f32_progress.txt"; echo "rc=$?" >> "$L"
grep -E "^[a-z0-9_]+ +[0-9]" "$W/models_f32.txt" >> "$L"
timeout 150 python3 compare_torch.py "$W/models_f32.json" -o "$W/models_f32_torch.json" > "$W/models_f32_torch.txt" 2>&1; echo "compare rc=$?" >> "$L"
grep -E "^row|^[a-z0-9_]+ +[0-9]" "$W/models_f32_torch.txt" >> "$L"
stage "models bf16"
timeout 80 bin/kiln bench --suite=models --target=cuda --repeat=10 --precision=bf16 --filter='^gpt2_block' --json "$W/models_bf16.json" > "$W/models_bf16.txt" 2> "$W/models_bf16_progress.txt"; echo "rc=$?" >> "$L"
grep -E "^[a-z0-9_]+ +[0-9]" "$W/models_bf16.txt" >> "$L"
timeout 90 python3 compare_torch.py "$W/models_bf16.json" -o "$W/models_bf16_torch.json" > "$W/models_bf16_torch.txt" 2>&1; echo "compare rc=$?" >> "$L"
grep -E "^row|^[a-z0-9_]+ +[0-9]" "$W/models_bf16_torch.txt" >> "$L"
stage "bf16 attention rows"
for kir in cuda_checks/attention_*.kir; do row=$(basename $kir .kir)
  timeout 40 bin/kiln bench "$kir" --target=cuda --precision=bf16 --repeat=20 --profile > "$W/$row.txt" 2>&1
  echo "$row rc=$? $(grep -E '^ +[0-9]+ +attention' "$W/$row.txt")" >> "$L"
done
stage "profiles"
for p in f32 bf16; do for row in gpt2_block gpt2_block_train; do
  timeout 40 bin/kiln bench "$W/rows/$row.kir" --weights "$W/rows/$row.safetensors" --target=cuda --precision=$p --repeat=10 --warmup=3 --profile > "$W/profile_${row}_$p.txt" 2>&1
  echo "$row $p rc=$? $(grep -E '^steps|^latency' "$W/profile_${row}_$p.txt" | tr '\n' ';')" >> "$L"
done; done
stage done
