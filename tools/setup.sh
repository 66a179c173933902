#!/usr/bin/env bash
# Installs the Debian packages kiln's build and tests need, and nothing else.
# Idempotent: when everything is installed it only checks, in well under a second.
set -euo pipefail

packages=(
  bazel-bootstrap   # Bazel 4.2.3, the build
  g++               # the C++20 compiler
  libfmt-dev        # formatting
  catch2            # unit tests (v2)
  llvm-19-tools     # FileCheck and lit for the text tests
  python3           # runs lit
  libflatbuffers-dev    # the artifact's metadata (headers)
  flatbuffers-compiler  # flatc, for the artifact schema
  libxxhash-dev         # artifact section checksums
  llvm-19-dev       # CPU code generation (linked as the shared libLLVM-19.so)
  lld-19            # links the kernels into a shared object
  libopenblas-dev   # matmul in the runtime (f64, and f32 where oneDNN is not installed)
  libdnnl2          # oneDNN: f32 and bf16 matmuls in the runtime, opened at run time (docs/cpu.md)
  libdnnl-dev       # oneDNN's C API header, for its types (runtime/cpu/dnnl_matmul.cc)
  nlohmann-json3-dev  # safetensors headers
  clang-19          # builds the libFuzzer targets
  libclang-rt-19-dev  # libFuzzer, ASan and UBSan runtimes
  cmake             # builds the embedding example against an installed kiln (tests)
  pkgconf           # pkg-config, for the same test
  libcpp-httplib-dev  # the HTTP server of serving/ (kiln serve)
  libssl-dev        # OpenSSL headers: Debian's cpp-httplib is built with TLS, so its header includes them
  libbrotli-dev     # brotli headers, likewise
  libonnx-dev       # ONNX's protobuf messages, for the ONNX importer (frontends/onnx)
  libprotobuf-dev   # protobuf, which they are parsed with
  libonnx-testdata  # ONNX's node tests, the importer's conformance suite
  zlib1g-dev        # zlib, reads the gzip IDX files of examples/fashion_mnist_data
  dataset-fashion-mnist  # Fashion-MNIST (gzip IDX) in /usr/share/datasets/fashion-mnist, for the examples
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

# The CUDA toolkit (NVRTC and headers for the CUDA backend) is not a Debian package; the
# development machines have it at /usr/local/cuda (see docs/architecture.md).
if [[ ! -f /usr/local/cuda/include/nvrtc.h || ! -e /usr/local/cuda/lib64/libnvrtc.so ]]; then
  echo "setup: error: the CUDA toolkit is missing: kiln needs NVRTC and its headers at /usr/local/cuda (install the CUDA toolkit 12 or 13 there)" >&2
  exit 1
fi

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#packages[@]} packages are installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
if [[ $(id -u) -eq 0 ]]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "setup: error: need root (or sudo) to install: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Package lists on a fresh machine may be empty or stale.
if ! "${sudo[@]}" apt-get update -q; then
  echo "setup: error: 'apt-get update' failed; check the network and /etc/apt/sources.list" >&2
  exit 1
fi
if ! "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; then
  echo "setup: error: could not install ${missing[*]} (see apt-get's message above)" >&2
  exit 1
fi
echo "setup: done"
