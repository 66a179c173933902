#!/bin/bash
# The models suite on this machine's CPU with the build before (team of threads, 323edc5) and after (huge pages), then PyTorch (eager and torch.compile) beside the after build's rows.
set -x
cd /work/main
R=${R:-/tmp/res/suite}
date -u
for round in 1 2; do
  /tmp/kiln_base bench --suite=models --threads=2 --repeat=5 --json $R/models_before_$round.json > $R/models_before_$round.txt 2> /dev/null
  /tmp/kiln_hp2 bench --suite=models --threads=2 --repeat=5 --json $R/models_after_$round.json > $R/models_after_$round.txt 2> /dev/null
done
/tmp/torchenv/bin/python bench/compare_torch.py $R/models_after_2.json --repeat=15 -o $R/models_after_torch.json > $R/models_after_torch.txt 2>&1
date -u
