#!/bin/sh
# bf16 and f16 convolutions on the CPU's library (issue 24, eleventh session) on the 2-core
# VM. OLD is 489cc6b (convolutions lowered to im2col and matmuls at --precision), NEW the
# build named in each part. Models: kiln import /tmp/models/M.onnx -o $M/M.kir
# --weights-out=$M/M.safetensors (ONNX files of bench/export_models.py).
OLD=${OLD:-/tmp/s46/kiln_final2}
NEW=${NEW:-/tmp/s47/kiln_conv}      # 1f39197
FINAL=${FINAL:-/tmp/s47/kiln_final} # d33db74
M=${M:-/tmp/s47}
# Part 1 (onnx_batch1.txt): ONNX models at batch 1, before and after alternating, 3 rounds.
for round in 1 2 3; do
  for m in resnet18 resnet50 mobilenet_v2; do
    for p in bf16 f16; do
      for which in old new; do
        K=$OLD; [ $which = new ] && K=$NEW
        echo "== round $round $m $p $which"
        $K bench $M/$m.kir --weights $M/$m.safetensors --precision=$p --repeat=30 2>/dev/null | grep median
      done
    done
    echo "== round $round $m f32 new"
    $NEW bench $M/$m.kir --weights $M/$m.safetensors --repeat=30 2>/dev/null | grep median
  done
done > onnx_batch1.txt
# Part 2 (onnx_batch1_final.txt): f32, f16 and bf16 in turn with the final build.
for r in 1 2; do for m in resnet18 resnet50 mobilenet_v2; do for p in f32 f16 bf16; do
  echo "round $r $m $p $($FINAL bench $M/$m.kir --weights $M/$m.safetensors --precision=$p --repeat=30 2>/dev/null |
    grep -o 'median [0-9.]* ms')"
done; done; done > onnx_batch1_final.txt
# Part 3 (suite/): the models suite's convolutional rows beside torch.compile: suite/run.sh.
# Part 4 (onnx_bf16.*): every ONNX model compiled with --precision=bf16 against ONNX
# Runtime's f32 outputs, timed beside ONNX Runtime (f32) and PyTorch eager under
# torch.autocast(bfloat16); onnx_bf16_before_hoist.* is the same with 1f39197's successor
# before autocast cast arguments where they lie.
(cd /work/main && /tmp/torchenv/bin/python bench/onnx_models.py /tmp/models --kiln $FINAL --precision bf16 \
  --rounds 2 --repeat 10 --json $OLDPWD/onnx_bf16.json > $OLDPWD/onnx_bf16.txt 2> $OLDPWD/onnx_bf16.err)
# Part 5: Fashion-MNIST, 5 epochs (fm_*.txt), and its training step's profiles
# (fashion_mnist --dump-ir=FILE [--precision=bf16], then kiln bench FILE --random-weights
# --profile: fashion_mnist_step_*_profile.txt).
for p in f32 bf16 f16; do
  bazel-bin/examples/fashion_mnist --epochs=5 --threads=2 --precision=$p --out=/tmp/fm_$p > fm_$p.txt
done
# Part 6: GPT-2 small in bf16, kiln bench gpt2_small.kir --weights ... --precision=bf16
# --profile: before (gpt2_small_bf16_profile_1_before.txt), with casts at the argument
# (_2_cast_at_argument), with the embedding's bf16 copy (_3_copy).
# Part 7 (train_casts.txt): gpt2_block_train in bf16 and f16, before (kiln_head: 527eb14
# plus the docs commit) and after f6bc958 (kiln_head2), two rounds; profiles in
# gpt2_block_train_bf16_profile_{before,after}.txt. Part 8: suite_transformers/run.sh.
# f16_matmuls.txt: gpt2_block and bert_layer in f16 with 489cc6b, d33db74 and a62ed98.
