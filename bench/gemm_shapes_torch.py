#!/usr/bin/env python3
"""torch.matmul (cuBLAS/cuBLASLt, f32, TF32 off) at the GEMM shapes of kiln's models suite
and at 4096^3, timed with CUDA events (median of 50 after 5 warm-ups): the library's rate
at each shape, beside which kiln's matmul steps (`kiln bench ROW.kir --profile
--target=cuda`) are judged. Needs PyTorch with CUDA.

    python3 bench/gemm_shapes_torch.py
"""
import torch, statistics
torch.set_float32_matmul_precision("highest")
def bench(f, n=50):
    for _ in range(5): f()
    torch.cuda.synchronize(); ts = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); f(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    return statistics.median(ts)
shapes = [  # (batch, m, k, n, transpose_a, transpose_b, what)
    (1, 4096, 4096, 4096, 0, 0, "square 4096"),
    (1, 4096, 768, 2304, 0, 0, "gpt2 qkv"), (1, 4096, 768, 768, 0, 0, "gpt2 proj"),
    (1, 4096, 768, 3072, 0, 0, "gpt2 fc"), (1, 4096, 3072, 768, 0, 0, "gpt2 fc2"),
    (96, 512, 64, 512, 0, 1, "gpt2 q.kT"), (96, 512, 512, 64, 0, 0, "gpt2 p.v"),
    (1, 3072, 4096, 768, 1, 0, "gpt2 dW fc2 (xT.dy)"), (1, 768, 4096, 3072, 1, 0, "gpt2 dW fc"),
    (1, 4096, 768, 3072, 0, 1, "gpt2 dx fc2 (dy.WT)"), (1, 4096, 3072, 768, 0, 1, "gpt2 dx fc"),
    (1, 2048, 768, 768, 0, 0, "bert q/k/v/o"), (1, 2048, 768, 3072, 0, 0, "bert fc"), (1, 2048, 3072, 768, 0, 0, "bert fc2"),
    (192, 128, 64, 128, 0, 1, "bert q.kT"), (192, 128, 128, 64, 0, 0, "bert p.v"),
]
for b, m, k, n, ta, tb, what in shapes:
    a = torch.rand(b, k, m, device="cuda").transpose(1, 2) if ta else torch.rand(b, m, k, device="cuda")
    w = torch.rand(b, n, k, device="cuda").transpose(1, 2) if tb else torch.rand(b, k, n, device="cuda")
    if b == 1: a, w = a[0], w[0]
    ms = bench(lambda: torch.matmul(a, w))
    print(f"{what:24s} b={b:3d} m={m:5d} k={k:5d} n={n:5d}: {ms:.4f} ms, {2*b*m*n*k/ms/1e9:.1f} TFLOP/s")
