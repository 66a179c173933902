#!/bin/bash
# Four more alternating rounds of the rows whose medians moved most in run.sh (GPT-2's and
# the MLP's bf16 training steps), OLD first then NEW in odd rounds, NEW first in even ones.
OLD=${OLD:-/tmp/oldbin/kiln} NEW=${NEW:-/tmp/newbin/kiln} ROWS=${ROWS:-/tmp/mexp}
cd "$ROWS"
for round in 3 4 5 6; do
  order="old new"; [ $((round % 2)) = 0 ] && order="new old"
  for m in gpt2_block_train mlp_train; do
    for which in $order; do
      b=$OLD; [ $which = new ] && b=$NEW
      r=20; [ $m = gpt2_block_train ] && r=5
      $b bench $m.kir --random-weights --precision=bf16 --repeat=$r --warmup=2 2>/dev/null | grep -E "^latency" |
        sed "s/^/$round $m bf16 $which /"
    done
  done
done
