#!/bin/bash
# Matmul epilogues, batches across threads, operands read in place: BASE (caed976) against FINAL.
set -x
cd /work/main
R=/tmp/res/final
date -u
for round in 1 2; do
  /tmp/kiln_base bench --suite=models --threads=2 --repeat=5 --json $R/models_before_$round.json > $R/models_before_$round.txt 2>&1
  /tmp/kiln_final bench --suite=models --threads=2 --repeat=5 --json $R/models_after_$round.json > $R/models_after_$round.txt 2>&1
done
/tmp/torchenv/bin/python bench/compare_torch.py $R/models_after_2.json --repeat=15 -o $R/models_after_torch.json > $R/models_after_torch.txt 2>&1
# Profiles of the two transformer rows, each compiled and run by its own build.
for row in bert_layer gpt2_block; do
  for b in base final; do
    /tmp/kiln_$b compile /tmp/suite/$row.kir --weights=/tmp/suite/$row.safetensors --target=cpu -o $R/${row}_$b.kiln > /dev/null
    /tmp/kiln_$b bench $R/${row}_$b.kiln --profile --threads=2 --repeat=10 > $R/profile_${row}_$b.txt 2>&1
  done
done
rm -f $R/*.kiln
/tmp/torchenv/bin/python bench/onnx_models_ab.py /tmp/models --before /tmp/kiln_base --after /tmp/kiln_final --models bert_base,gpt2_small,vit_b_16,swin_t,convnext_tiny,maxvit_t --rounds 2 --json $R/onnx_ab.json > $R/onnx_ab.txt 2>&1
/tmp/torchenv/bin/python bench/onnx_models.py /tmp/models --kiln /tmp/kiln_final --models resnet18,resnet50,mobilenet_v2,vit_b_16,bert_base,gpt2_small --rounds 3 --json $R/six_models.json > $R/six_models.txt 2>&1
# The library calls alone (g++ -O2 -fopenmp, -ldnnl): oneDNN's matmul with bias and GELU
# post-ops; batched sgemm, per-GEMM threads or batches across threads.
cd $R && g++ -O2 -std=c++17 mm_post.cc -o /tmp/mm_post -ldnnl && g++ -O2 -fopenmp -std=c++17 bmm.cc -o /tmp/bmm -ldnnl
(OMP_NUM_THREADS=2 /tmp/mm_post 2048 3072 768; OMP_NUM_THREADS=2 /tmp/mm_post 2048 768 768; /tmp/bmm 192 128 128 64 T; /tmp/bmm 192 128 64 128 N; /tmp/bmm 96 512 64 512 N; /tmp/bmm 96 512 512 64 N; /tmp/bmm 96 512 512 64 T; /tmp/bmm 3 256 256 256 N; /tmp/bmm 16 512 512 512 N) > $R/library_calls.txt 2>&1
date -u
