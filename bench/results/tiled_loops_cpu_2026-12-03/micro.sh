#!/bin/bash
# One-thread kernels of a transposed read (the .kir files beside this script), each binary
# compiling its own artifact, alternating for ROUNDS rounds: the profile's step time.
#   micro.sh OLD NEW > micro.txt
old=$1 new=$2 here=$(dirname "$0") work=$(mktemp -d)
for r in $(seq ${ROUNDS:-3}); do
  for f in "$here"/*.kir; do
    for side in old new; do
      ${!side} compile "$f" -o "$work/k.kiln" > /dev/null
      echo "$(basename "$f" .kir) round $r $side $(${!side} bench "$work/k.kiln" --threads=1 --repeat=300 --profile 2>/dev/null | grep -E '^ +0 ' | awk '{print $4 " ms, " $7 " of copy"}')"
    done
  done
done
rm -rf "$work"
