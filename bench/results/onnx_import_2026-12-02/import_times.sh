#!/bin/bash
# kiln import MODEL.onnx -o M.kir --weights-out=W.safetensors: before (old) and after the
# ONNX values' constants became shared (new), alternating; wall seconds and peak RSS.
for r in 1 2 3; do
  for m in bert_base gpt2_small; do
    for b in old new; do
      bin=/tmp/kiln_dedup; [ $b = new ] && bin=/tmp/kiln_shared_tensor
      /usr/bin/time -f "round $r $m $b %e s %M KB" $bin import /tmp/zoo/$m.onnx -o /tmp/dw/imp.kir --weights-out=/tmp/dw/imp_$b.safetensors 2>&1 | tail -1
    done
    cmp /tmp/dw/imp_old.safetensors /tmp/dw/imp_new.safetensors && echo "round $r $m: the same weights file"
  done
done
