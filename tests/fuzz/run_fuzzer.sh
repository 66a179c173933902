#!/bin/bash
# Runs a libFuzzer binary for a bounded time (fixed seed) over its committed seed corpus; any crash,
# sanitizer report or abort fails the test. Arguments: fuzzer, seed directory, seconds.
set -euo pipefail
fuzzer=$1
seeds=$2
seconds=${3:-20}
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/corpus.XXXXXX")
# New inputs go to the writable work directory; the seeds are read-only runfiles.
exec "$fuzzer" -seed=1 -max_total_time="$seconds" -max_len=4096 -timeout=5 -rss_limit_mb=2048 \
  -print_final_stats=1 "$work" "$seeds"
