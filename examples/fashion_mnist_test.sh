#!/usr/bin/env bash
# The Fashion-MNIST example end to end on a few hundred images, in f32 and with bf16 mixed
# precision: the training loss falls from the first epoch to the second, and the saved
# inference artifact, run by the runtime-only classifier, gives the accuracy the training
# program reported.
set -euo pipefail
dir="${TEST_TMPDIR:-$(mktemp -d)}"
summary=""
for precision in f32 bf16; do
  out="$dir/fm_$precision"
  log="$out.log"
  examples/fashion_mnist --epochs=2 --limit=640 --test-limit=500 --threads=2 --precision=$precision --out="$out" |
    tee "$log"
  grep -q "target cpu-x86_64, $precision, ready in" "$log" || { echo "FAIL: no $precision header line"; exit 1; }
  first=$(sed -n 's/^epoch 1: loss \([0-9.]*\),.*/\1/p' "$log")
  second=$(sed -n 's/^epoch 2: loss \([0-9.]*\),.*/\1/p' "$log")
  trained=$(sed -n 's/^test accuracy: //p' "$log")
  [[ -n "$first" && -n "$second" && -n "$trained" ]] || { echo "FAIL: missing epoch or accuracy lines"; exit 1; }
  awk -v a="$first" -v b="$second" 'BEGIN { exit !(b < a) }' ||
    { echo "FAIL: $precision loss did not fall: $first -> $second"; exit 1; }
  classified=$(examples/fashion_mnist_classify "$out/fashion_mnist.kiln" 500 | sed -n 's/^test accuracy: //p')
  [[ "$classified" == "$trained" ]] ||
    { echo "FAIL: the $precision artifact gives $classified, training reported $trained"; exit 1; }
  summary="$summary $precision: loss $first -> $second, accuracy $trained;"
done
# Bad flags are errors with a usage line.
err="$dir/fm.err"
if examples/fashion_mnist --epoch=2 2>"$err"; then echo "FAIL: a bad flag was accepted"; exit 1; fi
grep -q "^fashion_mnist: unknown flag '--epoch=2'" "$err" || { cat "$err"; echo "FAIL: bad flag message"; exit 1; }
if examples/fashion_mnist --schedule=linear 2>"$err"; then echo "FAIL: a bad schedule was accepted"; exit 1; fi
grep -q "^fashion_mnist: --schedule is cosine or constant, got 'linear'" "$err" || { cat "$err"; echo "FAIL: bad schedule message"; exit 1; }
if examples/fashion_mnist --precision=f8 2>"$err"; then echo "FAIL: a bad precision was accepted"; exit 1; fi
grep -q "^fashion_mnist: --precision is f32, bf16 or f16, got 'f8'" "$err" || { cat "$err"; echo "FAIL: bad precision message"; exit 1; }
echo "PASS:$summary"
