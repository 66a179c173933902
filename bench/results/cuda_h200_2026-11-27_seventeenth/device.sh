#!/usr/bin/env bash
# The seventeenth session's device calls. STAGES picks: "fast attn models rows" (call 1), "slow bf16 sums" (call 2).
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"; root=$(pwd)
[ -d /tmp/kiln-gpu ] || tar -xJf gpu/kiln-gpu.tar.xz -C /tmp; K=/tmp/kiln-gpu
nvrtc=$(dirname "$(readlink -f /usr/local/cuda/lib64/libnvrtc.so.13 2>/dev/null || find / -name 'libnvrtc.so.1[23]' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$K/lib:$nvrtc KILN_CACHE_DIR=/tmp/kiln-cache PYTHONUNBUFFERED=1
L=$O/log.txt
stage() { echo "== $(date +%T) $*" | tee -a "$L"; }
{ date; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; git -C "$root" log --oneline -1; } >> "$L" 2>&1
cd $K
S=" ${STAGES:-fast attn models rows} "
has() { [[ $S == *" $1 "* ]]; }
T=bin/cuda_gpu_test
tier() {  # name, grep for the cases kept (-v: dropped), timeout
  $T --list-test-names-only | grep -E '^CUDA' | grep $2 -e text-test -e 'quick row' | sed 's/,.*/*/' > /tmp/$1.txt
  KILN_REQUIRE_GPU=1 timeout $3 $T -f /tmp/$1.txt --durations yes > "$O/gpu_tests_$1.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  grep -E "FAILED|passed|failed|^[0-9.]+ s:" "$O/gpu_tests_$1.txt" | tail -24 >> "$L"
}
if has fast; then stage "GPU tier, all but the two long cases"; tier fast -v 200; fi
if has attn; then stage "f32 attention: the kernel and what it replaces"
  for arch in sm_90 sm_75,sm_90; do a=${arch%%,*}
    timeout 60 bin/kiln compile cuda_checks/f32_attention_gpt2.kir --target=cuda --cuda-arch=$arch -o /tmp/f32att_$a.kiln > /dev/null 2>&1
    timeout 40 bin/kiln bench /tmp/f32att_$a.kiln --target=cuda --repeat=20 --profile > "$O/f32_attention_gpt2_$a.txt" 2>&1
    echo "f32_attention_gpt2 $arch rc=$?" | tee -a "$L"; grep -E '^ +[0-9]+ +|^steps' "$O/f32_attention_gpt2_$a.txt" >> "$L"; done
  bin/kiln bench --suite=models --export=/tmp/rows > /dev/null
  for row in gpt2_block bert_layer gpt2_block_train; do for arch in sm_90 sm_75,sm_90; do a=${arch%%,*}
    timeout 90 bin/kiln compile /tmp/rows/$row.kir --weights /tmp/rows/$row.safetensors --target=cuda --cuda-arch=$arch -o /tmp/${row}_$a.kiln > /dev/null 2>&1
    timeout 40 bin/kiln bench /tmp/${row}_$a.kiln --target=cuda --repeat=20 --warmup=3 --profile > "$O/${row}_f32_$a.txt" 2>&1
    echo "$row f32 $arch rc=$? $(grep -E '^steps' "$O/${row}_f32_$a.txt")" | tee -a "$L"; done; done
  for kir in cuda_checks/attention_*.kir; do r=$(basename $kir .kir)
    timeout 40 bin/kiln bench $kir --target=cuda --precision=bf16 --repeat=20 --profile > "$O/$r.txt" 2>&1
    echo "$r rc=$? $(grep -E '^ +[0-9]+ +attention' "$O/$r.txt")" | tee -a "$L"; done
  timeout 120 python3 attention_torch.py > "$O/attention_torch.txt" 2>&1; echo "attention_torch rc=$?" | tee -a "$L"; cat "$O/attention_torch.txt" >> "$L"; fi
if has models; then stage "models f32"
  timeout 90 bin/kiln bench --suite=models --target=cuda --repeat=10 --filter='^(gpt2_block|bert_layer|mlp_train)' --json "$O/models_f32.json" > "$O/models_f32.txt" 2> "$O/models_f32_progress.txt"; echo "rc=$?" | tee -a "$L"
  grep -E "^[a-z0-9_]+ +[0-9]" "$O/models_f32.txt" >> "$L"
  timeout 120 python3 compare_torch.py "$O/models_f32.json" -o "$O/models_f32_torch.json" > "$O/models_f32_torch.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  grep -E "^row|^[a-z0-9_]+ +[0-9]" "$O/models_f32_torch.txt" >> "$L"; fi
if has rows; then stage "long rows, bf16 rows"
  timeout 40 bin/kiln bench --target=cuda --repeat=20 --filter='^(softmax_(4096|32768)|layernorm|chain8)(_bf16)?$' --json "$O/fusion_rows.json" > "$O/fusion_rows.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  grep -E "^plain|^[a-z0-9_]+ +[0-9]" "$O/fusion_rows.txt" >> "$L"; fi
if has slow; then stage "GPU tier, the two long cases"; tier slow "" 260; fi
if has bf16; then stage "models bf16"
  timeout 60 bin/kiln bench --suite=models --target=cuda --repeat=10 --precision=bf16 --filter='^(gpt2_block|bert_layer)' --json "$O/models_bf16.json" > "$O/models_bf16.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  grep -E "^[a-z0-9_]+ +[0-9]" "$O/models_bf16.txt" >> "$L"
  timeout 80 python3 compare_torch.py "$O/models_bf16.json" -o "$O/models_bf16_torch.json" > "$O/models_bf16_torch.txt" 2>&1; echo "rc=$?" | tee -a "$L"
  grep -E "^row|^[a-z0-9_]+ +[0-9]" "$O/models_bf16_torch.txt" >> "$L"; fi
if has sums; then stage "reductions against a copy"
  for kir in column_sum full_sum; do
    timeout 20 bin/kiln bench cuda_checks/$kir.kir --random-weights --target=cuda --repeat=50 --profile > "$O/$kir.txt" 2>&1; echo "$kir rc=$?" | tee -a "$L"
    grep -E "^ +[0-9]+ +[a-z]|^plain copy" "$O/$kir.txt" >> "$L"; done; fi
stage done
cd "$O" && tar -cf - --exclude=pack.tar.xz . | xz -T0 -6 > "$O/pack.tar.xz"
