#!/usr/bin/env bash
# Packs the GPU test tier and `kiln bench` for a GPU machine that has the NVIDIA driver and
# the CUDA toolkit but not Bazel or kiln's Debian packages: the optimized binaries, the
# shared libraries they load (except glibc's and NVRTC, which the toolkit provides), the
# text-test models the GPU tier reads, and the benchmark scripts. On that machine:
#
#   tar -xJf kiln-gpu.tar.xz && kiln-gpu/run.sh [OUTDIR]
#
# runs, each stage under its own time limit (more than one 10-minute device call on an
# H200 since the attention stage times its variants: split them with KILN_STAGES): the
# GPU tier (KILN_REQUIRE_GPU=1); the models suite, beside PyTorch where it is installed
# (compare_torch.py), in f32 and GPT-2's rows in bf16; each model's profile and
# torch.compile's top kernels; a column sum, a full sum and a 4096^3 matmul against a copy
# and torch.matmul, torch.matmul at the suite's GEMM shapes, and each of those shapes
# through an artifact against a direct cublasLtMatmul (bench/lt_compare.cc, f32 and
# bf16); attention in bf16 at S=4096 beside PyTorch's flash attention (the kernel's
# variants, and GPT-2's bf16 block with 16 and 32 query rows a warp; forward and backward,
# bench/cuda_checks/train_attention_*; the f32 backward's two kernels against the matmuls
# they replace, at GPT-2's shape and in its f32 training row); the fusion suite beside PyTorch (its bf16 rows
# too); and, if KILN_FASHION_MNIST names the dataset's folder, Fashion-MNIST with kiln
# and PyTorch (KILN_FASHION_EPOCHS epochs, default 2); and, if KILN_ONNX_MODELS names a folder of
# bench/export_models.py's files, those models (KILN_ONNX_LIST, default the six of
# docs/onnx.md) compiled for CUDA and checked against ONNX Runtime (bench/onnx_models.py).
# KILN_STAGES picks stages (default: "tier models profiles checks attention fusion fashion onnx"),
# KILN_MODEL_PRECISIONS the suite's precisions (default "f32 bf16"), KILN_BF16_ROWS the
# rows it runs in bf16 (a --filter, default '^gpt2_block'), KILN_PROFILE_PRECISION the
# profiles' precision (default f32) and KILN_PROFILE_ROWS
# the profiled rows. Output goes to OUTDIR (default: kiln-gpu/out), a
# summary to OUTDIR/summary.txt; KILN_PACK=FILE.tar.xz packs OUTDIR into one file at the end.
set -euo pipefail
out=$(realpath -m "${1:-kiln-gpu.tar.xz}")  # relative to where it is called from
cd "$(dirname "$0")/.."
bazel build -c opt --dynamic_mode=off //tools:kiln //tests:cuda_gpu_test //examples:fashion_mnist //bench:lt_compare
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/kiln-gpu/bin" "$stage/kiln-gpu/lib"
cp bazel-bin/tools/kiln bazel-bin/tests/cuda_gpu_test bazel-bin/examples/fashion_mnist bazel-bin/bench/lt_compare \
  "$stage/kiln-gpu/bin/"
ldd bazel-bin/tools/kiln bazel-bin/tests/cuda_gpu_test bazel-bin/examples/fashion_mnist bazel-bin/bench/lt_compare | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libpthread|librt|libdl)\.so|libnvrtc' | xargs -I{} cp -L {} "$stage/kiln-gpu/lib/"
git ls-files 'tests/lit/*.kir' | tar -cf - -T - | tar -C "$stage/kiln-gpu" -xf -
cp bench/compare_torch.py bench/trace_to_svg.py bench/gemm_shapes_torch.py bench/torch_top_kernels.py bench/attention_torch.py \
  bench/fashion_mnist_torch.py bench/onnx_models.py bench/export_models.py "$stage/kiln-gpu/"
cp -r bench/cuda_checks "$stage/kiln-gpu/"
cat > "$stage/kiln-gpu/run.sh" <<'RUN'
#!/usr/bin/env bash
# The GPU tier, then the benchmarks (see tools/gpu_bundle.sh); output under $1 (default:
# out/ here), one line per stage in summary.txt.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "${1:-$here/out}" && cd "${1:-$here/out}" && pwd)
nvrtc=$(dirname "$(readlink -f /usr/local/cuda/lib64/libnvrtc.so.13 2>/dev/null || find / -name 'libnvrtc.so.1[23]' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$here/lib:$nvrtc KILN_CACHE_DIR=${KILN_CACHE_DIR:-/tmp/kiln-cache} PYTHONUNBUFFERED=1
cd "$here"
summary=$out/summary.txt
note() { echo "$*" | tee -a "$summary"; }
stages=" ${KILN_STAGES:-tier models profiles checks attention fusion fashion onnx} "
stage() { [[ $stages == *" $1 "* ]]; }
torch=no
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null && torch=yes
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
if stage tier; then
  note "== $(date -u +%FT%TZ) GPU tier"
  # The ops and the models suite's quick rows take most of the tier's time (docs/benchmarks.md).
  KILN_REQUIRE_GPU=1 timeout 400 bin/cuda_gpu_test --durations yes > "$out/gpu_tests.txt" 2>&1
  note "GPU tier: exit $? ($(tail -2 "$out/gpu_tests.txt" | head -1))"
  grep -E "FAILED|^ +(random graph|element|with)" "$out/gpu_tests.txt" | head -20 >> "$summary"
fi
models() {  # name, precision, filter, timeout
  note "== $(date -u +%T) models suite, $2"
  timeout "$4" bin/kiln bench --suite=models --target=cuda --repeat=10 --precision="$2" --filter="$3" \
    --json "$out/$1.json" > "$out/$1.txt" 2> "$out/$1_progress.txt"
  note "kiln bench: exit $?"; grep -E "^[a-z0-9_]+ +[0-9]" "$out/$1.txt" >> "$summary"
  if [ $torch = yes ]; then
    timeout 180 python3 compare_torch.py "$out/$1.json" -o "$out/$1_torch.json" > "$out/$1_torch.txt" 2>&1
    note "compare_torch.py: exit $?"; grep -E "^row|^[a-z0-9_]+ +[0-9]" "$out/$1_torch.txt" >> "$summary"
  fi
}
if stage models; then
  # ResNet-18 and the CNN compile fused and unfused through NVRTC first: the f32 suite
  # passed 120 s on an H200's host (2026-11-27); the unfused ResNet-18 takes 31 s of NVRTC on
  # the 2-core development VM.
  [[ " ${KILN_MODEL_PRECISIONS:-f32 bf16} " == *" f32 "* ]] && models models_f32 f32 . 300
  [[ " ${KILN_MODEL_PRECISIONS:-f32 bf16} " == *" bf16 "* ]] &&
    models models_bf16 bf16 "${KILN_BF16_ROWS:-^(gpt2|llama)_block}" 180
fi
if stage profiles; then
note "== $(date -u +%T) profiles"
bin/kiln bench --suite=models --export="$out/rows" > /dev/null
for row in ${KILN_PROFILE_ROWS:-gpt2_block gpt2_block_train bert_layer llama_block_train mlp_train resnet18 cnn_train}; do
  timeout 40 bin/kiln bench "$out/rows/$row.kir" --weights "$out/rows/$row.safetensors" --target=cuda --repeat=10 \
    --precision="${KILN_PROFILE_PRECISION:-f32}" \
    --warmup=3 --profile --json "$out/profile_$row.json" --trace "$out/trace_$row.json" > "$out/profile_$row.txt" 2>&1
  note "kiln bench $row --profile: exit $? ($(grep '^steps:' "$out/profile_$row.txt" | cut -d: -f2 | cut -d, -f1))"
done
rm -rf "$out/rows"
[ $torch = yes ] && [ -f "$out/models_f32.json" ] && timeout 90 python3 torch_top_kernels.py "$out/models_f32.json" "$here" gpt2_block,gpt2_block_train \
  > "$out/torch_top_kernels.txt" 2>&1
fi
if stage checks; then
note "== $(date -u +%T) reductions and matmuls against their limits"
for kir in column_sum full_sum matmul_4096; do
  for precision in f32 bf16; do
    [ $kir != matmul_4096 ] && [ $precision = bf16 ] && continue
    timeout 30 bin/kiln bench cuda_checks/$kir.kir --random-weights --target=cuda --precision=$precision --repeat=50 \
      --profile > "$out/${kir}_$precision.txt" 2>&1
    note "$kir $precision: exit $?"; grep -E "^ +[0-9]+ +[a-z]|^plain copy" "$out/${kir}_$precision.txt" >> "$summary"
  done
done
[ $torch = yes ] && timeout 60 python3 gemm_shapes_torch.py > "$out/gemm_shapes_torch.txt" 2>&1 && cat "$out/gemm_shapes_torch.txt" >> "$summary"
for dtype in f32 bf16; do
  timeout 90 bin/lt_compare --dtype=$dtype > "$out/lt_compare_$dtype.txt" 2>&1
  note "lt_compare $dtype: exit $?"; grep -E "^[a-z0-9]" "$out/lt_compare_$dtype.txt" | tail -n +2 >> "$summary"
done
fi
if stage attention; then
  note "== $(date -u +%T) attention in bf16 against PyTorch's flash attention"
  # The bf16 kernel's variants (codegen/cuda/attention_kernel.h), in alternating rounds:
  # the default (16 query rows a warp, cp.async up to heads of 64), 32 rows a warp (heads
  # up to 64) and cp.async at heads of 128.
  for round in 1 2; do
    for kir in cuda_checks/attention_*.kir; do
      row=$(basename "$kir" .kir)
      for variant in 16:64 32:64 16:128; do
        rows=${variant%:*} async=${variant#*:}
        [[ $row == *d128* && $rows == 32 ]] && continue
        [[ $row != *d128* && $async == 128 ]] && continue
        KILN_CUDA_ATTENTION_WARP_ROWS=$rows KILN_CUDA_ATTENTION_ASYNC_HEAD_DIM=$async timeout 40 bin/kiln bench "$kir" \
          --target=cuda --precision=bf16 --repeat=20 --profile > "$out/${row}_rows${rows}_async${async}_$round.txt" 2>&1
        note "$row, $rows rows a warp, cp.async up to $async, round $round: exit $? $(grep -E '^ +[0-9]+ +attention' \
          "$out/${row}_rows${rows}_async${async}_$round.txt")"
      done
    done
  done
  # f32 at GPT-2's shape: the f32 kernel, and the matmuls and softmax it replaces (an
  # artifact whose lowest architecture is sm_75 has no attention step).
  for arch in sm_90 sm_75,sm_90; do
    timeout 60 bin/kiln compile cuda_checks/f32_attention_gpt2.kir --target=cuda --cuda-arch=$arch \
      -o "$out/f32_attention_${arch%%,*}.kiln" > /dev/null 2>&1
    timeout 40 bin/kiln bench "$out/f32_attention_${arch%%,*}.kiln" --target=cuda --repeat=20 --profile \
      > "$out/f32_attention_gpt2_${arch%%,*}.txt" 2>&1
    note "f32_attention_gpt2 $arch: exit $? $(grep -E '^ +[0-9]+ +' "$out/f32_attention_gpt2_${arch%%,*}.txt" | tr -s ' ' | tr '\n' ';')"
    rm -f "$out/f32_attention_${arch%%,*}.kiln"
  done
  # Forward and backward beside flash attention's fwd+bwd column: the backward as the
  # decomposition's matmuls and softmax kernels (the default), and as the two tensor-core
  # kernels (format 1.21), in alternating rounds.
  for kir in cuda_checks/train_attention_*.kir; do
    row=$(basename "$kir" .kir)
    timeout 30 bin/kiln opt "$kir" --passes='autodiff{wrt=q,k,v}' > "$out/$row.grad.kir"
    for round in 1 2; do
      for backward in matmuls kernels; do
        result="$out/${row}_${backward}_$round.txt"
        KILN_CUDA_ATTENTION_BACKWARD=$backward timeout 90 bin/kiln bench "$out/$row.grad.kir" --target=cuda \
          --precision=bf16 --repeat=10 --warmup=2 --profile > "$result" 2>&1
        note "$row (forward and backward on $backward), round $round: exit $? $(grep -E '^latency|^steps|^ +[0-9]+ +attention' "$result" | tr -s ' ' | tr '\n' ';')"
      done
    done
    rm -f "$out/$row.grad.kir"
  done
  # The models suite's rows, for the runs below.
  bin/kiln bench --suite=models --export="$out/rows" > /dev/null
  # f32 attention's backward at GPT-2's shape, and the f32 training row: CUDA's two
  # backward kernels against the GEMMs and softmax kernels they replace, in alternating
  # rounds.
  timeout 30 bin/kiln opt cuda_checks/train_f32_attention_gpt2.kir --passes='autodiff{wrt=q,k,v}' \
    > "$out/train_f32_attention_gpt2.grad.kir"
  for round in 1 2; do
    for backward in kernels matmuls; do
      result="$out/train_f32_attention_gpt2_${backward}_$round.txt"
      KILN_CUDA_ATTENTION_BACKWARD=$backward timeout 60 bin/kiln bench "$out/train_f32_attention_gpt2.grad.kir" \
        --target=cuda --repeat=20 --warmup=3 --profile > "$result" 2>&1
      note "train_f32_attention_gpt2, backward on $backward, round $round: exit $? $(grep -E '^latency|^steps|^ +[0-9]+ +attention' "$result" | tr -s ' ' | tr '\n' ';')"
      result="$out/gpt2_block_train_f32_${backward}_$round.txt"
      KILN_CUDA_ATTENTION_BACKWARD=$backward timeout 90 bin/kiln bench "$out/rows/gpt2_block_train.kir" \
        --weights "$out/rows/gpt2_block_train.safetensors" --target=cuda --repeat=20 --warmup=3 --profile \
        > "$result" 2>&1
      note "gpt2_block_train f32, backward on $backward, round $round: exit $? $(grep -E '^latency|^steps|^ +[0-9]+ +attention' "$result" | tr -s ' ' | tr '\n' ';')"
      result="$out/gpt2_block_train_bf16_${backward}_$round.txt"
      KILN_CUDA_ATTENTION_BACKWARD=$backward timeout 90 bin/kiln bench "$out/rows/gpt2_block_train.kir" \
        --weights "$out/rows/gpt2_block_train.safetensors" --target=cuda --precision=bf16 --repeat=20 --warmup=3 \
        --profile > "$result" 2>&1
      note "gpt2_block_train bf16, backward on $backward, round $round: exit $? $(grep -E '^latency|^steps|^ +[0-9]+ +attention' "$result" | tr -s ' ' | tr '\n' ';')"
    done
  done
  rm -f "$out/train_f32_attention_gpt2.grad.kir"
  # GPT-2's bf16 block (heads of 64) with 16 and 32 rows a warp, in alternating rounds.
  for round in 1 2; do
    for rows in 16 32; do
      result="$out/gpt2_block_bf16_rows${rows}_$round.txt"
      KILN_CUDA_ATTENTION_WARP_ROWS=$rows timeout 60 bin/kiln bench "$out/rows/gpt2_block.kir" \
        --weights "$out/rows/gpt2_block.safetensors" --target=cuda --precision=bf16 --repeat=20 --warmup=3 --profile \
        > "$result" 2>&1
      note "gpt2_block bf16, $rows rows a warp, round $round: exit $? $(grep -E '^latency|^ +[0-9]+ +attention' "$result" | tr -s ' ' | tr '\n' ';')"
    done
  done
  # The f32 models with and without their attention steps (an artifact whose lowest
  # architecture is sm_75 has none), in one run each.
  for row in gpt2_block bert_layer; do
    for arch in sm_90 sm_75,sm_90; do
      kiln_file="$out/rows/${row}_${arch%%,*}.kiln"
      timeout 90 bin/kiln compile "$out/rows/$row.kir" --weights "$out/rows/$row.safetensors" --target=cuda \
        --cuda-arch=$arch -o "$kiln_file" > /dev/null 2>&1
      timeout 40 bin/kiln bench "$kiln_file" --target=cuda --repeat=20 --warmup=3 --profile \
        > "$out/${row}_f32_${arch%%,*}.txt" 2>&1
      note "$row f32 $arch: exit $? ($(grep '^steps:' "$out/${row}_f32_${arch%%,*}.txt" | cut -d: -f2 | cut -d, -f1))"
    done
  done
  rm -rf "$out/rows"
  [ $torch = yes ] && timeout 120 python3 attention_torch.py > "$out/attention_torch.txt" 2>&1
  cat "$out/attention_torch.txt" >> "$summary"
fi
if stage fusion; then
  note "== $(date -u +%T) fusion suite"
  timeout 90 bin/kiln bench --target=cuda --repeat=30 --json "$out/fusion_cuda.json" --svg "$out/fusion_cuda.svg" \
    > "$out/fusion_cuda.txt" 2> "$out/fusion_cuda_progress.txt"
  note "kiln bench: exit $?"; grep -E "^[a-z0-9_]+ +[0-9]" "$out/fusion_cuda.txt" >> "$summary"
  if [ $torch = yes ]; then
    timeout 240 python3 compare_torch.py "$out/fusion_cuda.json" -o "$out/fusion_cuda_torch.json" \
      > "$out/fusion_cuda_torch.txt" 2>&1
    note "compare_torch.py: exit $?"; grep -E "^row|^[a-z0-9_]+ +[0-9]" "$out/fusion_cuda_torch.txt" >> "$summary"
  fi
fi
if stage fashion && [ -n "${KILN_FASHION_MNIST:-}" ]; then
  epochs=${KILN_FASHION_EPOCHS:-2}
  note "== $(date -u +%T) Fashion-MNIST, $epochs epochs"
  timeout 150 bin/fashion_mnist --target=cuda --epochs="$epochs" --data="$KILN_FASHION_MNIST" --out="$out/fashion_mnist" \
    > "$out/fashion_kiln.txt" 2>&1
  note "kiln: exit $?"; grep -E "^epoch|^test" "$out/fashion_kiln.txt" >> "$summary"
  rm -f "$out"/fashion_mnist/*.kiln "$out"/fashion_mnist/*.safetensors
  [ $torch = yes ] && timeout 150 python3 fashion_mnist_torch.py --device cuda --epochs "$epochs" \
    --data "$KILN_FASHION_MNIST" > "$out/fashion_torch.txt" 2>&1 && grep -E "^epoch|^test" "$out/fashion_torch.txt" >> "$summary"
fi
if stage onnx && [ -n "${KILN_ONNX_MODELS:-}" ] && [ $torch = yes ]; then
  note "== $(date -u +%T) ONNX models on CUDA"
  timeout 300 python3 onnx_models.py "$KILN_ONNX_MODELS" --kiln bin/kiln --target cuda --rounds 3 --pause 0.2 \
    --models "${KILN_ONNX_LIST:-resnet18,resnet50,mobilenet_v2,vit_b_16,bert_base,gpt2_small}" \
    --json "$out/onnx_models_cuda.json" > "$out/onnx_models_cuda.txt" 2> "$out/onnx_models_cuda_progress.txt"
  note "onnx_models.py: exit $?"; cat "$out/onnx_models_cuda.txt" >> "$summary"
fi
note "== $(date -u +%T) done"
# KILN_PACK=FILE.tar.xz packs everything written under the output folder into one file, for
# a device call that brings back only a few files.
if [ -n "${KILN_PACK:-}" ]; then
  tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -T0 -6 > "$KILN_PACK"
  echo "packed $out into $KILN_PACK"
fi
RUN
chmod +x "$stage/kiln-gpu/run.sh"
tar -C "$stage" -cf - kiln-gpu | xz -T0 -6 > "$out"
echo "gpu_bundle: wrote $out ($(du -h "$out" | cut -f1))"
