#!/bin/bash
# Installs kiln from this build into a fresh prefix (tools/install_tree.sh, as
# tools/install.sh does) and builds the programs of docs/embedding.md outside this
# workspace: with CMake, with pkg-config, and in a Bazel workspace of their own; each runs.
# Also compiles every installed runtime header alone under strict warnings.
# Arguments: VERSION_HEADER INSTALL_TREE KILN KILN_RUN RUNTIME_LIB COMPILER_LIB SERVING_LIB STAND_IN_WORKSPACES... -- HEADERS...
set -euo pipefail
version=$(sed -nE 's/.*kVersion = "([^"]+)".*/\1/p' "$1")
install_tree=$2 kiln=$3 kiln_run=$4 runtime_lib=$5 compiler_lib=$6 serving_lib=$7
shift 7
stand_ins=()
while [[ $1 != -- ]]; do
  stand_ins+=("$(dirname "$1")")
  shift
done
shift
headers=("$@")
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/embedding.XXXXXX")
prefix=$work/prefix
src=$PWD

echo "== install"
"$install_tree" "$prefix" "$version" --bazel-repos "${stand_ins[@]}" --bin "$kiln" "$kiln_run" --lib "$runtime_lib" "$compiler_lib" "$serving_lib" --include "${headers[@]}"
for f in bin/kiln bin/kiln-run lib/libkiln_runtime.so lib/libkiln_compiler.so lib/libkiln_serving.so \
  include/kiln/runtime/model.h include/kiln/serving/server.h lib/pkgconfig/kiln-runtime.pc lib/pkgconfig/kiln-compiler.pc \
  lib/pkgconfig/kiln-serving.pc lib/cmake/kiln/kilnConfig.cmake share/kiln/kiln.BUILD; do
  [[ -e $prefix/$f ]] || { echo "missing $prefix/$f" >&2; exit 1; }
done
"$prefix/bin/kiln" --version | grep -q "compiler: kiln $version"

echo "== the runtime's headers alone, under strict warnings"
for h in base/result.h runtime/model.h runtime/npy.h runtime/format/safetensors.h; do
  echo "#include \"$h\"" > "$work/header.cc"
  g++ -std=c++20 -fsyntax-only -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion -Wold-style-cast -Werror \
    -I"$prefix/include/kiln" "$work/header.cc"
done

echo "== every installed header alone: nothing it includes is missing from the install"
for h in $(cd "$prefix/include/kiln" && find . -name '*.h' | sort); do
  echo "#include \"${h#./}\"" > "$work/header.cc"
  g++ -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I"$prefix/include/kiln" "$work/header.cc"
done

echo "== CMake"
cmake -S "$src/examples/embedding/cmake" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release > "$work/cmake.log"
cmake --build "$work/cmake" -j 2 >> "$work/cmake.log"
"$work/cmake/make_model" "$work/classifier.kiln"
python3 "$src/tests/lit/cli/Inputs/write_npy.py" "$work/x.npy" 2,4 1,2,3,4,-1,-2,-3,-4
mkdir -p "$work/out"
"$work/cmake/predict" "$work/classifier.kiln" "$work/x.npy" "$work/out" | grep -q "probs.npy: f32\[2,3\]"
# The runtime alone gives what kiln-run gives.
"$prefix/bin/kiln-run" "$work/classifier.kiln" --input x="$work/x.npy" --output "$work/out_run" > /dev/null
cmp "$work/out/probs.npy" "$work/out_run/probs.npy"
! ldd "$work/cmake/predict" | grep -qE 'libkiln_compiler|libLLVM|nvrtc'
# The embedded server answers over HTTP, and stops when its input closes.
python3 - "$work/cmake/serve" "$work/classifier.kiln" <<'PY'
import http.client, subprocess, sys
server = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
port = int(server.stdout.readline().rsplit(":", 1)[1])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
c.request("POST", "/v2/models/classifier/infer",
          '{"inputs":[{"name":"x","shape":[2,4],"datatype":"FP32","data":[1,2,3,4,-1,-2,-3,-4]}]}')
r = c.getresponse()
body = r.read().decode()
assert r.status == 200 and '"shape":[2,3]' in body, (r.status, body)
c.close()
server.stdin.close()
assert server.wait(timeout=30) == 0 and server.stdout.read() == "stopped\n"
PY
! ldd "$work/cmake/serve" | grep -qE 'libkiln_compiler|libLLVM|nvrtc'

echo "== pkg-config"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
g++ "$src/examples/embedding/cmake/predict.cc" $(pkg-config --cflags --libs kiln-runtime) -o "$work/predict_pc"
"$work/predict_pc" "$work/classifier.kiln" "$work/x.npy" "$work/out" | grep -q "probs.npy"
g++ "$src/examples/embedding/cmake/make_model.cc" $(pkg-config --cflags --libs kiln-compiler) -o "$work/make_model_pc"
g++ "$src/examples/embedding/cmake/serve.cc" $(pkg-config --cflags --libs kiln-serving) -o "$work/serve_pc"
"$work/make_model_pc" "$work/again.kiln" | grep -q "wrote"

echo "== a Bazel workspace of its own"
ws=$work/workspace
mkdir -p "$ws"
cp "$src/examples/embedding/bazel/BUILD" "$src/examples/embedding/bazel/latency.cc" "$ws/"
# The WORKSPACE docs/embedding.md shows, with this prefix.
sed -n '/embedding-workspace-begin/,/embedding-workspace-end/p' "$src/docs/embedding.md" | sed '1d;$d' | sed 's/^    //' |
  sed "s|/opt/kiln|$prefix|g" > "$ws/WORKSPACE"
grep -q "new_local_repository" "$ws/WORKSPACE"
(cd "$ws" && bazel --output_user_root="$work/bazel_root" --batch build //:latency > "$work/bazel.log" 2>&1) || { cat "$work/bazel.log" >&2; exit 1; }
"$ws/bazel-bin/latency" "$work/classifier.kiln" 3 | grep -q "median of 3 runs"
echo "embedding_test: installed, built with CMake, pkg-config and Bazel, and ran"
