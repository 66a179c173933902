#!/bin/sh
# The models suite with this change (the half-precision epilogues) beside torch.compile on the 2-core VM,
# f32 and bf16 (PyTorch under torch.autocast(bfloat16) for the bf16 rows).
K=${K:-./kiln}
$K bench --suite=models --filter='gpt2_block|bert_layer|mlp_train' --json f32.json > f32.txt 2> f32.err
/tmp/torchenv/bin/python bench/compare_torch.py f32.json -o f32_torch.json > f32_torch.txt 2>&1
$K bench --suite=models --filter='gpt2_block$|bert_layer' --precision=bf16 --json bf16.json > bf16.txt 2> bf16.err
/tmp/torchenv/bin/python bench/compare_torch.py bf16.json -o bf16_torch.json > bf16_torch.txt 2>&1
