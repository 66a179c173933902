#!/bin/bash
# Alternating rounds: the runtime before (old) and after (new) the team's home parts,
# `kiln bench MODEL.kiln --repeat=100` per model, median latency.
# Usage: ab.sh OLD_KILN NEW_KILN ROUNDS MODEL.kiln...
old=$1 new=$2 rounds=$3; shift 3
for r in $(seq 1 "$rounds"); do
  for m in "$@"; do
    for side in old new; do
      bin=$old; [ $side = new ] && bin=$new
      ms=$($bin bench "$m" --repeat=100 2>&1 | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
      echo "$r $(basename "$m" .kiln) $side $ms"
    done
  done
done
