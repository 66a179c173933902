#!/bin/bash
# arenas.sh KILN: each suite row's arena and live lower bound (kiln opt with kiln compile's passes), per target and precision; ORDER=graph|memory picks the fusion order.
K=$1; cd ${ROWS:-/tmp/mexp}
for m in gpt2_block gpt2_block_train bert_layer mlp_train cnn_train resnet18; do
  for t in cpu cuda; do for p in f32 bf16 f16; do
    ac=""; [ $p != f32 ] && ac="autocast{precision=$p},"
    if [ $t = cpu ]; then lc="lower-conv{keep_library=true}"; fo="fusion{matmul_views=true matmul_epilogues=onednn recompute=inline attention=cpu order=${ORDER:-memory}}";
    else lc="lower-conv"; fo="fusion{matmul_views=true matmul_epilogues=cublaslt single_batch_views=true recompute=all attention=cuda order=${ORDER:-memory}}"; fi
    a=$($K opt $m.kir --passes="decompose,${ac}${lc},canonicalize,cse,dce,$fo,memory-plan" 2>&1 | grep -m1 "memory plan" | sed 's/.*arena \([0-9]*\) bytes, live lower bound \([0-9]*\).*/\1 \2/')
    echo "$m $t $p $a"
  done; done
done
