#!/usr/bin/env python3
"""torch.compile's top CUDA kernels (torch.profiler, 5 runs after 3 warm-ups) for chosen
rows of a `kiln bench --suite=models --target=cuda` JSON, rebuilt by compare_torch.py
(under torch.autocast where the JSON's precision says so), to set beside kiln's
`--profile` of the same rows.

    python3 bench/torch_top_kernels.py models.json DIR_OF_compare_torch.py gpt2_block,gpt2_block_train
"""
import json, sys
sys.path.insert(0, sys.argv[2])
import torch
import compare_torch as ct
result = json.load(open(sys.argv[1]))
torch.set_float32_matmul_precision("high" if result.get("allow_tf32") else "highest")
for row in result["rows"]:
    if row["name"] not in sys.argv[3].split(","):
        continue
    fn, inputs = ct.make_row(torch, row, "cuda", False)
    fn = ct.autocast(torch, fn, "cuda", result.get("precision", "f32"))
    fn = torch.compile(fn)
    for _ in range(3):
        fn(*inputs)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            fn(*inputs)
        torch.cuda.synchronize()
    print("==", row["name"], result.get("precision", "f32"), "(5 runs)")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=70))
