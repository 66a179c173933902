#!/usr/bin/env bash
# The ONNX node tests of the expected-pass list (tests/onnx/expected_pass.txt), imported,
# compiled for the CPU, run and compared with ONNX's outputs: any that does not pass fails
# the test. Arguments: the runner, the list.
set -euo pipefail
runner=$(realpath "$1") expected=$(realpath "$2")
data=/usr/share/libonnx-testdata/data/node
[[ -d $data ]] || { echo "FAIL: $data is missing (tools/setup.sh installs libonnx-testdata)"; exit 1; }
"$runner" --data="$data" --expected="$expected" > "${TEST_TMPDIR:-/tmp}/onnx_conformance.txt" || {
  grep -v '^passed' "${TEST_TMPDIR:-/tmp}/onnx_conformance.txt"
  exit 1
}
tail -1 "${TEST_TMPDIR:-/tmp}/onnx_conformance.txt"
