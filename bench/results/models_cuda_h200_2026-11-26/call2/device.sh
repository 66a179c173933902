#!/usr/bin/env bash
# The second device call: GPU tier, models f32 beside PyTorch, long rows, reductions, GEMM shapes, bf16 rows, profiles.
set -u
O=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p "$O" "$W"
root=${ROOT:-$(pwd)}; export ROOT=$root
[ "${1:-}" = inner ] || tar -xJf gpu/kiln-gpu.tar.xz -C /tmp
K=/tmp/kiln-gpu
nvrtc=$(dirname "$(readlink -f /usr/local/cuda/lib64/libnvrtc.so.13 2>/dev/null || find / -name 'libnvrtc.so.1[23]' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$K/lib:$nvrtc KILN_CACHE_DIR=/tmp/kiln-cache PYTHONUNBUFFERED=1
L=$O/log.txt
stage() { echo "== $(date +%T) $*" | tee -a "$L"; }
[ "${1:-}" = inner ] || { date; nvidia-smi; git -C "$root" log --oneline -1 2>/dev/null; git -C "$root" diff --stat | tail -1; } > "$L" 2>&1
cd $K
if [ "${1:-}" != inner ]; then
  timeout ${BUDGET:-375} "$root/gpu/device2.sh" inner; echo "stages rc=$?" >> "$L"
  rm -rf "$W/rows"; tar -czf "$O/work.tgz" -C "$W" .; exit 0
fi
bench_row() { # row precision extra...
  local row=$1 p=$2; shift 2
  timeout 40 bin/kiln bench "$W/rows/$row.kir" --weights "$W/rows/$row.safetensors" --target=cuda --precision=$p "$@" > "$W/profile_${row}_$p.txt" 2>&1; echo "$row $p rc=$?" | tee -a "$L"
}
for s in tier models fusion reductions bf16 profiles torchprof; do case $s in
tier) stage "GPU tier"
  KILN_REQUIRE_GPU=1 timeout 150 bin/cuda_gpu_test --durations yes > "$O/gpu_tests.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  grep -E "FAILED|passed|failed|^[0-9.]+ s:" "$O/gpu_tests.txt" | tail -40 >> "$L" ;;
models) stage "models suite f32"
  timeout 120 bin/kiln bench --suite=models --target=cuda --repeat=10 --json "$W/models.json" > "$W/models.txt" 2> "$W/models_progress.txt"; echo "rc=$?" | tee -a "$L"
  cat "$W/models.txt" >> "$L"
  stage "compare_torch f32"
  timeout 110 python3 compare_torch.py "$W/models.json" -o "$W/models_torch.json" --repeat=10 > "$W/compare_torch.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  grep -v "W1126\|Warning\|warn" "$W/compare_torch.txt" | grep -E "^row|^[a-z0-9_]+ +[0-9]" >> "$L" ;;
fusion) stage "long rows"
  timeout 30 bin/kiln bench --target=cuda --repeat=20 --filter='^softmax_(4096|32768)$|^layernorm$' --json "$W/fusion_rows.json" > "$W/fusion_rows.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  grep -E "^(softmax|layernorm)" "$W/fusion_rows.txt" >> "$L" ;;
reductions) stage "reductions, GEMM shapes"
  for f in reductions fullsum; do
    timeout 20 bin/kiln bench "$root/gpu/$f.kir" --target=cuda --repeat=50 --profile > "$W/$f.txt" 2>&1; echo "$f rc=$?" | tee -a "$L"
    grep -E "^ +[0-9]+ |^plain copy" "$W/$f.txt" >> "$L"
  done
  timeout 40 python3 "$root/gpu/torch_gemms.py" > "$W/torch_gemms.txt" 2>&1; echo "gemms rc=$?" | tee -a "$L"; cat "$W/torch_gemms.txt" >> "$L" ;;
bf16) stage "models bf16"
  timeout 60 bin/kiln bench --suite=models --target=cuda --repeat=10 --precision=bf16 --filter='^gpt2_block' --json "$W/models_bf16.json" > "$W/models_bf16.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  grep -E "^gpt2" "$W/models_bf16.txt" >> "$L"
  timeout 70 python3 compare_torch.py "$W/models_bf16.json" -o "$W/models_bf16_torch.json" --repeat=10 > "$W/compare_torch_bf16.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  grep -E "^row|^[a-z0-9_]+ +[0-9]" "$W/compare_torch_bf16.txt" >> "$L" ;;
profiles) stage "profiles"
  bin/kiln bench --suite=models --export="$W/rows" > /dev/null
  for row in gpt2_block gpt2_block_train bert_layer resnet18 cnn_train; do bench_row $row f32 --repeat=10 --warmup=3 --profile; done
  for row in gpt2_block gpt2_block_train; do bench_row $row bf16 --repeat=10 --warmup=3 --profile; done
  grep -E "^steps|^latency" "$W"/profile_*.txt >> "$L" ;;
torchprof) stage "torch profile"
  timeout 60 python3 "$root/gpu/torch_profile.py" "$W/models.json" "$K" gpt2_block,gpt2_block_train > "$W/torch_profile.txt" 2>&1; echo "rc=$?" | tee -a "$L" ;;
esac; done
stage "done"
