#!/usr/bin/env bash
# The short version of bench/serve_load.sh for CI: a small MLP compiled with --batch, served
# by `kiln serve` on loopback, 300 requests from each of 1, 8 and 64 clients; no request may
# fail, and SIGTERM must end the server with exit code 0.
# Arguments: kiln, load_test, serve_models.py.
set -euo pipefail
kiln=$(realpath "$1") load=$(realpath "$2") models=$(realpath "$3")
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/serve_load.XXXXXX")
python3 "$models" "$work" small 16 64,128,10
"$kiln" compile "$work/small_b16.kir" --weights="$work/small.safetensors" --batch -o "$work/small.kiln" > /dev/null
"$kiln" serve "$work/small.kiln" --port=0 --model-threads=1 > "$work/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 200); do grep -q "listening on" "$work/serve.log" && break; sleep 0.05; done
port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$work/serve.log")
[[ -n "$port" ]] || { cat "$work/serve.log"; echo "FAIL: the server did not start"; exit 1; }
"$load" --model=small --port="$port" --requests=300 --clients=1,8,64 --time-limit-s=60 | grep -v '^JSON'
kill -TERM $server
status=0
wait $server || status=$?
[[ $status -eq 0 ]] || { cat "$work/serve.log"; echo "FAIL: kiln serve exited $status after SIGTERM"; exit 1; }
grep -q "kiln serve: stopped" "$work/serve.log" || { cat "$work/serve.log"; echo "FAIL: no 'stopped' line"; exit 1; }
echo "PASS"
