#!/bin/bash
# The GPU tier (cuda_gpu_test) on kiln's CUDA emulator (tests/cuda_emulator): the runtime's
# CUDA executor, the generated kernels (compiled for the host), graph capture and replay and
# the cuBLAS/cuBLASLt calls, checked against the interpreter on a machine without a GPU.
# Usage: cuda_emulated_test.sh EMULATOR.so PROGRAM [ARGS...] (cuda_gpu_test and its Catch2
# arguments, or another program that runs CUDA artifacts).
set -euo pipefail
emulator=$(realpath "$1")
program=$2
shift 2
export KILN_LIBCUDA=$emulator KILN_LIBCUBLAS=$emulator KILN_LIBCUBLASLT=$emulator
# Every case must run: a driver that fails to open is a failure, not a skip.
export KILN_REQUIRE_GPU=1
# The emulator finds each image's source in the NVRTC cache the compiles write.
export KILN_CACHE_DIR="${TEST_TMPDIR:-$(mktemp -d)}/kiln-cache"
exec "$program" "$@"
