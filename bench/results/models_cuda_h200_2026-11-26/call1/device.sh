#!/usr/bin/env bash
# One device call: GPU tier, kiln bench rows, PyTorch beside them, profiles, bf16, Fashion-MNIST.
set -u
O=${OUT:-/tmp/out}; W=/tmp/w; mkdir -p "$O" "$W"
root=${ROOT:-$(pwd)}; export ROOT=$root
[ "${1:-}" = inner ] || tar -xJf gpu/kiln-gpu.tar.xz -C /tmp
K=/tmp/kiln-gpu
nvrtc=$(dirname "$(readlink -f /usr/local/cuda/lib64/libnvrtc.so.13 2>/dev/null || find / -name 'libnvrtc.so.1[23]' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$K/lib:$nvrtc KILN_CACHE_DIR=/tmp/kiln-cache PYTHONUNBUFFERED=1
L=$O/log.txt
stage() { echo "== $(date +%T) $*" | tee -a "$L"; }
[ "${1:-}" = inner ] || { date; nvidia-smi; git -C "$root" log --oneline -1 2>/dev/null; } > "$L" 2>&1
cd $K
if [ "${1:-}" != inner ]; then
  timeout ${BUDGET:-430} "$root/gpu/device.sh" inner; echo "stages rc=$?" >> "$L"
  rm -rf "$W/rows" "$W/fm"; tar -czf "$O/work.tgz" -C "$W" .; exit 0
fi
STAGES=${STAGES:-tier models profiles torch fusion bf16 fashion}
for s in $STAGES; do case $s in
tier) stage "GPU tier"
  KILN_REQUIRE_GPU=1 timeout 170 bin/cuda_gpu_test --durations yes > "$O/gpu_tests.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  grep -E "FAILED|passed|failed|^[0-9.]+ s:" "$O/gpu_tests.txt" | tail -40 >> "$L" ;;
models) stage "models suite"
  timeout 150 bin/kiln bench --suite=models --target=cuda --repeat=20 --json "$W/models.json" > "$W/models.txt" 2> "$W/models_progress.txt"; echo "rc=$?" | tee -a "$L"
  cat "$W/models.txt" >> "$L"; tail -3 "$W/models_progress.txt" >> "$L" ;;
profiles) stage "profiles"
  bin/kiln bench --suite=models --export="$W/rows" > /dev/null
  for row in gpt2_block gpt2_block_train bert_layer mlp_train resnet18 cnn_train; do
    timeout 40 bin/kiln bench "$W/rows/$row.kir" --weights "$W/rows/$row.safetensors" --target=cuda --repeat=10 --warmup=3 --profile \
      --json "$W/profile_$row.json" > "$W/profile_$row.txt" 2>&1; echo "$row rc=$?" | tee -a "$L"
  done ;;
torch) stage "compare_torch models"
  timeout 240 python3 compare_torch.py "$W/models.json" -o "$W/models_torch.json" > "$W/compare_torch.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  tail -20 "$W/compare_torch.txt" >> "$L" ;;
fusion) stage "fusion suite"
  timeout 90 bin/kiln bench --target=cuda --repeat=30 --json "$W/fusion.json" > "$W/fusion.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  cat "$W/fusion.txt" >> "$L" ;;
bf16) stage "bf16"
  for p in f32 bf16 f16; do
    timeout 40 bin/kiln bench "$root/gpu/mm4096.kir" --random-weights --target=cuda --precision=$p --repeat=20 --profile > "$W/mm_$p.txt" 2>&1; echo "mm $p rc=$?" | tee -a "$L"
    grep -E "matmul|library|median" "$W/mm_$p.txt" | head -8 >> "$L"
  done
  for row in gpt2_block gpt2_block_train; do
    timeout 60 bin/kiln bench "$W/rows/$row.kir" --weights "$W/rows/$row.safetensors" --target=cuda --precision=bf16 --repeat=20 --json "$W/bf16_$row.json" > "$W/bf16_$row.txt" 2>&1; echo "bf16 $row rc=$?" | tee -a "$L"
    grep -E "median|latency" "$W/bf16_$row.txt" | head -4 >> "$L"
  done
  timeout 60 python3 "$root/gpu/torch_mm.py" >> "$L" 2>&1 ;;
fashion) stage "fashion"
  timeout 60 bin/fashion_mnist --target=cuda --epochs=2 --data="$root/gpu/fmnist" --out="$W/fm" > "$W/fashion_kiln.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  tail -4 "$W/fashion_kiln.txt" >> "$L"
  timeout 60 python3 "$root/bench/fashion_mnist_torch.py" --device cuda --epochs 2 --data "$root/gpu/fmnist" > "$W/fashion_torch.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  tail -4 "$W/fashion_torch.txt" >> "$L" ;;
esac; done
stage "done"
