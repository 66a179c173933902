#!/bin/bash
# kiln compile --target=cuda with an empty NVRTC cache: before (old), with --split-compile=8
# (split), and with it and kernels shared between steps of the same code (shared); rounds
# alternate the three binaries.
for r in 1 2; do
  for m in efficientnet_b0 convnext_tiny bert_base gpt2_small; do
    for b in old split shared; do
      bin=/tmp/kiln_$b; [ $b = split ] && bin=/tmp/kiln_new; [ $b = shared ] && bin=/tmp/kiln_dedup
      rm -rf /tmp/dw/c_$b
      s=$(date +%s.%N)
      KILN_CACHE_DIR=/tmp/dw/c_$b $bin compile /tmp/zoo/$m.onnx --target=cuda -o /tmp/dw/x_$b.kiln >/dev/null 2>&1 || echo "FAILED $b $m"
      printf "round %d %-16s %-6s %6.2f s %s kernels\n" $r $m $b $(echo "$(date +%s.%N) - $s" | bc) $(cat /tmp/dw/c_$b/nvrtc/*.cu | grep -c __global__)
    done
  done
done
