#!/bin/bash
# Fusion's time on a 63,602-line training graph (deep_graph.py 1200, autodiff'd), kiln opt
# --pipeline=default, OLD (80ef543) against NEW, alternating, three rounds each.
OLD=${OLD:-/tmp/oldbin/kiln} NEW=${NEW:-/tmp/newbin/kiln}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
python3 "$HERE/deep_graph.py" 1200 > $T/deep.kir
$NEW opt $T/deep.kir --wrt=w,g --passes=autodiff > $T/deep_train.kir
wc -l < $T/deep_train.kir
for round in 1 2 3; do
  for which in old new; do
    b=$OLD; [ $which = new ] && b=$NEW
    /usr/bin/time -f "$round $which %e s %M KB" $b opt $T/deep_train.kir --pipeline=default > /dev/null
  done
done
rm -rf $T
