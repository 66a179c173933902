#!/usr/bin/env bash
# The serving load test (docs/serving.md): a small and a larger MLP, each compiled with a
# batch of 1 (every request its own run) and with --batch of 64 (concurrent requests packed
# into one run), served by `kiln serve` on 127.0.0.1 and loaded with bench/load_test from
# 1, 8 and 64 clients. Writes the raw output under OUT (default bench/results/serving_DATE).
#
#   bench/serve_load.sh [OUT] [REQUESTS]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/results/serving_$(date +%Y-%m-%d)}
requests=${2:-10000}
bazel build -c opt //tools:kiln //bench:load_test >&2
kiln=bazel-out/k8-opt/bin/tools/kiln
load=bazel-out/k8-opt/bin/bench/load_test
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$out"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) cores"
} > "$out/machine.txt"
for model in small:64,128,10 large:784,4096,4096,10; do
  name=${model%%:*} dims=${model#*:}
  for batch in 1 64; do
    python3 bench/serve_models.py "$work" "$name" "$batch" "$dims"
    flags=()
    [[ $batch -gt 1 ]] && flags=(--batch)
    "$kiln" compile "$work/${name}_b$batch.kir" --weights="$work/$name.safetensors" "${flags[@]}" \
      -o "$work/${name}_b$batch.kiln" > /dev/null
    "$kiln" serve "${name}=$work/${name}_b$batch.kiln" --port=0 > "$work/serve.log" 2>&1 &
    server=$!
    for _ in $(seq 100); do grep -q "listening on" "$work/serve.log" && break; sleep 0.1; done
    port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$work/serve.log")
    echo "== $name, batch $batch ($dims)" | tee -a "$out/load_test.txt"
    "$load" --model="$name" --port="$port" --requests="$requests" --clients=1,8,64 \
      --artifact="$work/${name}_b$batch.kiln" | tee -a "$out/load_test.txt"
    kill -TERM $server
    wait $server
  done
done
