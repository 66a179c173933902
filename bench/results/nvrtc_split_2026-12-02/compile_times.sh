#!/bin/bash
# Paired rounds: kiln compile --target=cuda of ONNX zoo models with an empty NVRTC cache,
# the binary before (old) and after (new) --split-compile=8, alternating.
for r in 1 2 3; do
  for m in efficientnet_b0 mobilenet_v3_small convnext_tiny resnext50_32x4d; do
    for b in old new; do
      rm -rf /tmp/dw/c_$b
      s=$(date +%s.%N)
      KILN_CACHE_DIR=/tmp/dw/c_$b /tmp/kiln_$b compile /tmp/zoo/$m.onnx --target=cuda -o /tmp/dw/x_$b.kiln >/dev/null 2>&1 || echo "FAILED $b $m"
      printf "round %d %-20s %s %.2f s\n" $r $m $b $(echo "$(date +%s.%N) - $s" | bc)
    done
  done
done
