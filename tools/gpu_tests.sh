#!/usr/bin/env bash
# Runs the GPU test tier (tests tagged "gpu") on a machine with an NVIDIA GPU, failing
# rather than skipping when no driver is found.
set -euo pipefail
cd "$(dirname "$0")/.."
exec bazel test --test_tag_filters=gpu --test_env=KILN_REQUIRE_GPU=1 --test_output=errors //tests/... "$@"
