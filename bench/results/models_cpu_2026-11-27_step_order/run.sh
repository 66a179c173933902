#!/bin/bash
# The models suite's training rows on the 2-core VM's CPU with the steps in the graph's
# order (OLD: 80ef543, the session's start) and in the memory order (NEW), alternating,
# two rounds. OLD and NEW are `bazel build -c opt //tools:kiln` at each commit; the rows
# are `kiln bench --suite=models --export=DIR`'s .kir files.
OLD=${OLD:-/tmp/oldbin/kiln} NEW=${NEW:-/tmp/newbin/kiln} ROWS=${ROWS:-/tmp/mexp}
cd "$ROWS"
for round in 1 2; do
  for m in gpt2_block_train mlp_train cnn_train; do
    for prec in f32 bf16; do
      for which in old new; do
        b=$OLD; [ $which = new ] && b=$NEW
        r=20; [ $m = gpt2_block_train ] && r=5
        $b bench $m.kir --random-weights --precision=$prec --repeat=$r --warmup=2 2>/dev/null | grep -E "^latency" |
          sed "s/^/$round $m $prec $which /"
      done
    done
  done
done
