#!/usr/bin/env bash
# Session 15's device call: GPU tier, issue 23's f32 rows beside torch.compile, long rows and
# bf16 fusion rows against copy, GPT-2 in bf16 beside autocast, reductions, lt_compare, profiles.
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; root=$(pwd)
tar -xJf gpu/kiln-gpu.tar.xz -C /tmp; K=/tmp/kiln-gpu
nvrtc=$(dirname "$(readlink -f /usr/local/cuda/lib64/libnvrtc.so.13 2>/dev/null || find / -name 'libnvrtc.so.1[23]' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$K/lib:$nvrtc KILN_CACHE_DIR=/tmp/kiln-cache PYTHONUNBUFFERED=1
L=$O/log.txt
stage() { echo "== $(date +%T) $*" | tee -a "$L"; }
{ date; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; git -C "$root" log --oneline -1; } > "$L" 2>&1
cd $K
S=" ${STAGES:-tier models fusion bf16 checks profiles} "
has() { [[ $S == *" $1 "* ]]; }
if has tier; then stage "GPU tier"
  KILN_REQUIRE_GPU=1 timeout 150 bin/cuda_gpu_test --durations yes > "$O/gpu_tests.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  grep -E "FAILED|passed|failed" "$O/gpu_tests.txt" | tail -20 >> "$L"; fi
if has models; then stage "models f32"
  timeout 70 bin/kiln bench --suite=models --target=cuda --repeat=10 --filter='^(gpt2_block|bert_layer|mlp_train)' --json "$O/models_f32.json" > "$O/models_f32.txt" 2> "$O/models_f32_progress.txt"; echo "rc=$?" | tee -a "$L"
  grep -E "^[a-z0-9_]+ +[0-9]" "$O/models_f32.txt" >> "$L"
  timeout 100 python3 compare_torch.py "$O/models_f32.json" -o "$O/models_f32_torch.json" > "$O/models_f32_torch.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  grep -E "^row|^[a-z0-9_]+ +[0-9]" "$O/models_f32_torch.txt" >> "$L"; fi
if has fusion; then stage "long rows, bf16 rows"
  timeout 40 bin/kiln bench --target=cuda --repeat=20 --filter='^(softmax_(4096|32768)|layernorm|chain8)(_bf16)?$' --json "$O/fusion_rows.json" > "$O/fusion_rows.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  grep -E "^plain|^[a-z0-9_]+ +[0-9]" "$O/fusion_rows.txt" >> "$L"; fi
if has bf16; then stage "models bf16"
  timeout 50 bin/kiln bench --suite=models --target=cuda --repeat=10 --precision=bf16 --filter='^gpt2_block' --json "$O/models_bf16.json" > "$O/models_bf16.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  grep -E "^gpt2" "$O/models_bf16.txt" >> "$L"
  timeout 70 python3 compare_torch.py "$O/models_bf16.json" -o "$O/models_bf16_torch.json" > "$O/models_bf16_torch.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  grep -E "^row|^[a-z0-9_]+ +[0-9]" "$O/models_bf16_torch.txt" >> "$L"; fi
if has checks; then stage "reductions, lt_compare"
  for kir in column_sum full_sum; do
    timeout 20 bin/kiln bench cuda_checks/$kir.kir --random-weights --target=cuda --repeat=50 --profile > "$O/$kir.txt" 2>&1; echo "$kir rc=$?" | tee -a "$L"
    grep -E "^ +[0-9]+ +[a-z]|^plain copy" "$O/$kir.txt" >> "$L"; done
  for dtype in f32 bf16; do
    timeout 45 bin/lt_compare --dtype=$dtype > "$O/lt_compare_$dtype.txt" 2>&1; echo "lt_compare $dtype rc=$?" | tee -a "$L"
    cat "$O/lt_compare_$dtype.txt" >> "$L"; done; fi
if has profiles; then stage "profiles"
  bin/kiln bench --suite=models --export=/tmp/rows > /dev/null
  for rp in gpt2_block_train:f32 gpt2_block_train:bf16 gpt2_block:f32; do r=${rp%:*}; p=${rp#*:}
    timeout 30 bin/kiln bench /tmp/rows/$r.kir --weights /tmp/rows/$r.safetensors --target=cuda --precision=$p --repeat=10 --warmup=3 --profile > "$O/profile_${r}_$p.txt" 2>&1
    echo "$r $p rc=$? $(grep -E '^steps' "$O/profile_${r}_$p.txt")" | tee -a "$L"; done; fi
stage done
