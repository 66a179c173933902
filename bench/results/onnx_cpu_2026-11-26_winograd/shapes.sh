#!/bin/sh
# One 3x3 convolution with relu (batch 1, pads 1, random baked weights) per shape, with
# KILN_CPU_WINOGRAD off and on: median latency of 300 runs each, and the kernel the
# profile names with Winograd on. K: a -c opt build of kiln.
K=${K:?a kiln binary}
D=$(mktemp -d)
for spec in "16 16 56" "16 32 112" "24 24 56" "32 32 32" "32 32 56" "32 32 112" "32 64 28" "64 32 28" \
            "64 64 14" "64 64 28" "64 64 56" "128 128 14" "256 256 7"; do
  set -- $spec
  cat > "$D/c.kir" <<KIR
graph @c(%x: f32[1,$1,$3,$3], param %w: f32[$2,$1,3,3]) {
  %c: f32[1,$2,$3,$3] = conv(%x, %w) {pads=[1,1,1,1]}
  %y: f32[1,$2,$3,$3] = relu(%c)
  return %y
}
KIR
  off=$(KILN_CPU_WINOGRAD=off "$K" bench "$D/c.kir" --random-weights --repeat 300 2>&1 | grep latency | awk '{print $8}')
  on=$(KILN_CPU_WINOGRAD=on "$K" bench "$D/c.kir" --random-weights --repeat 300 2>&1 | grep latency | awk '{print $8}')
  impl=$("$K" bench "$D/c.kir" --random-weights --profile --repeat 2 --warmup 1 2>&1 | grep -E "^ +0 " | grep -o "\[.*\]")
  echo "C=$1 K=$2 ${3}x$3: off $off ms, on $on ms, on/off $(echo "scale=2; $on / $off" | bc) $impl"
done
rm -rf "$D"
