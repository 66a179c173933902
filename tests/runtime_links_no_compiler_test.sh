#!/bin/bash
# kiln-run (the runtime alone) must not load LLVM, lld or NVRTC, and must not link libcuda or
# cuBLAS (it opens them at run time, so it starts on machines without a GPU).
set -euo pipefail
libs=$(ldd "$1")
echo "$libs"
if grep -iE 'libLLVM|liblld|nvrtc|libclang|libcuda|libcublas' <<<"$libs"; then
  echo "kiln-run links a compiler library" >&2
  exit 1
fi
grep -q libopenblas <<<"$libs"
