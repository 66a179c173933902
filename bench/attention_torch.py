#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention (the flash backend) at the rows of
bench/cuda_checks/attention_*.kir: bf16 q, k, v of [4, H, 4096, D], causal and not; and in
f32 at GPT-2's shape (bench/cuda_checks/f32_attention_gpt2.kir).

Prints per row the forward's median time over --repeat runs (CUDA events, after warm-up,
on random inputs), its TFLOP/s (4·B·H·S²·D, half that when causal), and the forward with
backward beside it. Run on the GPU machine (tools/gpu_bundle.sh's attention stage), next
to `kiln bench bench/cuda_checks/attention_ROW.kir --target=cuda --precision=bf16`.
"""
import argparse
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

ROWS = [(16, 128, True), (16, 128, False), (32, 64, True), (32, 64, False)]


def timed(fn, repeat):
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=4096)
    args = parser.parse_args()
    b, s = args.batch, args.seq
    print(f"{'row':28} {'fwd ms':>9} {'TFLOP/s':>9} {'fwd+bwd ms':>11}")
    for heads, dim, causal in ROWS:
        name = f"attention_h{heads}_d{dim}_{'causal' if causal else 'full'}"
        q, k, v = (torch.randn(b, heads, s, dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        grad = torch.randn(b, heads, s, dim, device="cuda", dtype=torch.bfloat16)
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            fwd = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), args.repeat)

            def fwd_bwd():
                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                out.backward(grad)

            both = timed(fwd_bwd, args.repeat)
        flops = 4 * b * heads * s * s * dim / (2 if causal else 1)
        print(f"{name:28} {fwd:9.3f} {flops / fwd / 1e9:9.1f} {both:11.3f}", flush=True)
    # bench/cuda_checks/f32_attention_gpt2.kir: f32 (TF32 off, PyTorch's default for
    # matmuls) at GPT-2's shape, on the memory-efficient backend (flash takes half only).
    b32, heads, s32, dim = 8, 12, 512, 64
    q, k, v = (torch.randn(b32, heads, s32, dim, device="cuda", requires_grad=True) for _ in range(3))
    grad = torch.randn(b32, heads, s32, dim, device="cuda")
    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
        fwd = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), args.repeat)

        def fwd_bwd32():
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad)

        both = timed(fwd_bwd32, args.repeat)
    flops = 4 * b32 * heads * s32 * s32 * dim / 2
    print(f"{'f32_attention_gpt2':28} {fwd:9.3f} {flops / fwd / 1e9:9.1f} {both:11.3f}", flush=True)


if __name__ == "__main__":
    main()
