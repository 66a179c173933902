#!/bin/sh
# bf16 and f16 convolutions on the CPU's library (this change) against the lowered im2col
# form (before: 489cc6b), and beside torch.compile, on the 2-core VM.
# Part 1: ONNX models at batch 1 (kiln import), before and after alternating, 3 rounds.
# Part 2: the models suite's resnet18 (batch 16) and cnn_train rows, f32 and bf16,
# with bench/compare_torch.py (PyTorch under torch.autocast(bfloat16) for bf16).
OLD=${OLD:-/tmp/s46/kiln_final2}
NEW=${NEW:-/tmp/s47/kiln_conv}
M=${M:-/tmp/s47}
for round in 1 2 3; do
  for m in resnet18 resnet50 mobilenet_v2; do
    for p in bf16 f16; do
      for which in old new; do
        K=$OLD; [ $which = new ] && K=$NEW
        echo "== round $round $m $p $which"
        $K bench $M/$m.kir --weights $M/$m.safetensors --precision=$p --repeat=30 2>/dev/null | grep median
      done
    done
    echo "== round $round $m f32 new"
    $NEW bench $M/$m.kir --weights $M/$m.safetensors --repeat=30 2>/dev/null | grep median
  done
done > onnx_batch1.txt
# Part 3: every ONNX model of bench/export_models.py (in /tmp/models) compiled with
# --precision=bf16, its error against ONNX Runtime's f32 outputs, and timed beside ONNX
# Runtime (f32) and PyTorch eager under torch.autocast(bfloat16).
/tmp/torchenv/bin/python bench/onnx_models.py /tmp/models --kiln $NEW --precision bf16 --rounds 2 --repeat 10 \
  --json onnx_bf16.json > onnx_bf16.txt 2> onnx_bf16.err
