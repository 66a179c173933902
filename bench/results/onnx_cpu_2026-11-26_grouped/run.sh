#!/bin/sh
# Grouped convolutions kept channels-last (docs/cpu.md): the 2-core development VM,
# 2026-11-26. BEFORE and AFTER: -c opt builds of kiln without and with the change; M:
# bench/export_models.py's folder; python3 with onnxruntime and torch.
set -e
BEFORE=${BEFORE:?} AFTER=${AFTER:?}
M=${M:-/tmp/models}
OUT=$(cd "$(dirname "$0")" && pwd)
A=$(mktemp -d)
for m in resnext50_32x4d regnet_y_400mf; do
  "$BEFORE" compile "$M/$m.onnx" -o "$A/${m}_before.kiln" > /dev/null
  "$AFTER" compile "$M/$m.onnx" -o "$A/${m}_after.kiln" > /dev/null
done
for r in 1 2 3; do
  for m in resnext50_32x4d regnet_y_400mf; do
    "$BEFORE" bench "$A/${m}_before.kiln" --repeat 100 > "$OUT/ab_${m}_before_$r.txt" 2>&1
    "$AFTER" bench "$A/${m}_after.kiln" --repeat 100 > "$OUT/ab_${m}_after_$r.txt" 2>&1
  done
done
rm -rf "$A"
python3 bench/onnx_models.py "$M" --kiln "$AFTER" --models resnext50_32x4d,regnet_y_400mf --rounds 3 \
  --json "$OUT/grouped_models.json" > "$OUT/grouped_models.txt" 2>&1
