#!/usr/bin/env bash
# Packs the GPU test tier and `kiln bench` for a GPU machine that has the NVIDIA driver and
# the CUDA toolkit but not Bazel or kiln's Debian packages: the optimized binaries, the
# shared libraries they load (except glibc's and NVRTC, which the toolkit provides), and
# the text-test models the GPU tier reads. On that machine:
#
#   tar -xJf kiln-gpu.tar.xz && kiln-gpu/run.sh [OUTDIR]
#
# runs the GPU tier (KILN_REQUIRE_GPU=1), the CUDA fusion and models suites, and a profile
# of each model, writing their output to OUTDIR (default: kiln-gpu/out).
set -euo pipefail
out=$(realpath -m "${1:-kiln-gpu.tar.xz}")  # relative to where it is called from
cd "$(dirname "$0")/.."
bazel build -c opt --dynamic_mode=off //tools:kiln //tests:cuda_gpu_test
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/kiln-gpu/bin" "$stage/kiln-gpu/lib"
cp bazel-bin/tools/kiln bazel-bin/tests/cuda_gpu_test "$stage/kiln-gpu/bin/"
ldd bazel-bin/tools/kiln bazel-bin/tests/cuda_gpu_test | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libpthread|librt|libdl)\.so|libnvrtc' | xargs -I{} cp -L {} "$stage/kiln-gpu/lib/"
git ls-files 'tests/lit/*.kir' | tar -cf - -T - | tar -C "$stage/kiln-gpu" -xf -
cp bench/compare_torch.py bench/trace_to_svg.py "$stage/kiln-gpu/"
cat > "$stage/kiln-gpu/run.sh" <<'RUN'
#!/usr/bin/env bash
# The GPU tier, then `kiln bench --target=cuda`; output under $1 (default: out/ here).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "${1:-$here/out}" && cd "${1:-$here/out}" && pwd)
nvrtc=$(dirname "$(readlink -f /usr/local/cuda/lib64/libnvrtc.so.13 2>/dev/null || find / -name 'libnvrtc.so.1[23]' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$here/lib:$nvrtc KILN_CACHE_DIR=${KILN_CACHE_DIR:-/tmp/kiln-cache}
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
cd "$here"
KILN_REQUIRE_GPU=1 bin/cuda_gpu_test --durations yes > "$out/gpu_tests.txt" 2>&1
echo "GPU tier: exit $? (output in $out/gpu_tests.txt)"
tail -3 "$out/gpu_tests.txt"
bin/kiln bench --target=cuda --repeat=50 --json "$out/fusion_cuda.json" --svg "$out/fusion_cuda.svg" > "$out/fusion_cuda.txt" 2> "$out/fusion_cuda_progress.txt"
echo "kiln bench: exit $?"
cat "$out/fusion_cuda.txt"
# The models suite, then each row profiled step by step (python3 bench/compare_torch.py
# "$out/models_cuda.json", here, adds PyTorch where PyTorch is installed).
bin/kiln bench --suite=models --target=cuda --repeat=20 --json "$out/models_cuda.json" > "$out/models_cuda.txt" 2> "$out/models_cuda_progress.txt"
echo "kiln bench --suite=models: exit $?"
cat "$out/models_cuda.txt"
bin/kiln bench --suite=models --export="$out/rows" > /dev/null
for row in gpt2_block gpt2_block_train bert_layer mlp_train; do
  bin/kiln bench "$out/rows/$row.kir" --weights "$out/rows/$row.safetensors" --target=cuda --repeat=20 --profile \
    --json "$out/profile_$row.json" --trace "$out/trace_$row.json" > "$out/profile_$row.txt" 2>&1
  echo "kiln bench $row --profile: exit $?"
done
rm -rf "$out/rows"
RUN
chmod +x "$stage/kiln-gpu/run.sh"
tar -C "$stage" -cf - kiln-gpu | xz -T0 -6 > "$out"
echo "gpu_bundle: wrote $out ($(du -h "$out" | cut -f1))"
