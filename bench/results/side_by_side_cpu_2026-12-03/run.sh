#!/bin/bash
# Steps side by side on the CPU (docs/cpu.md): one binary, each artifact run with its
# schedule and with --steps-in-order, alternating, 5 rounds; then the zoo beside ONNX
# Runtime. K: this commit's kiln (bazel build -c opt //tools:kiln); ZOO: the models of
# bench/export_models.py (lstm_ts lstm_dyn gru_ts gru_dyn unet_ts unet_dyn bert_base).
set -eu
K=${K:-bazel-bin/tools/kiln}
ZOO=${ZOO:-/tmp/zoo}
OUT=$(dirname "$0")
PY=${PY:-python3}
for m in lstm_ts lstm_dyn gru_ts gru_dyn unet_ts unet_dyn bert_base; do
  "$K" compile "$ZOO/$m.onnx" -o "/tmp/$m.kiln" > /dev/null
done
for round in 1 2 3 4 5; do
  for m in lstm_ts lstm_dyn gru_ts gru_dyn unet_ts unet_dyn bert_base; do
    repeat=200; [ "$m" = bert_base ] && repeat=20
    for mode in side_by_side in_order; do
      flag=""; [ "$mode" = in_order ] && flag="--steps-in-order"
      echo "== round $round $m $mode"
      "$K" bench "/tmp/$m.kiln" --threads=2 --repeat=$repeat $flag 2> /dev/null | grep -E "^(arena|schedule|latency)"
    done
  done
done > "$OUT/ab_rounds.txt"
"$K" bench /tmp/lstm_ts.kiln --threads=2 --repeat=200 --profile > "$OUT/lstm_ts_profile.txt" 2>&1
"$K" bench /tmp/lstm_ts.kiln --threads=2 --repeat=200 --profile --steps-in-order > "$OUT/lstm_ts_profile_in_order.txt" 2>&1
$PY bench/onnx_models.py "$ZOO" --kiln "$K" --models lstm_ts,lstm_dyn,gru_ts,gru_dyn,unet_ts,unet_dyn,bert_base \
  --threads 2 --rounds 3 --json "$OUT/onnx_models.json" > "$OUT/onnx_models.txt" 2>&1
