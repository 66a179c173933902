#!/usr/bin/env python3
"""PyTorch beside run.sh's rows on the CPU: scaled_dot_product_attention's forward and
backward (y.backward(dy), causal, scale 0.125) on q, k, v and dy of [1, 8, 1024, 64] in
bf16 and f16, eager and under torch.compile, on torch's default 2 threads here. Prints the
median of --repeat timed runs (time.perf_counter, after warm-up) per row."""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F


def attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.125)


def median_ms(fn, repeat):
    for _ in range(5):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    compiled = torch.compile(attention)
    for dtype in (torch.bfloat16, torch.float16):
        torch.manual_seed(0)
        q, k, v = (torch.rand(1, 8, 1024, 64, dtype=dtype).mul(2).sub(1).requires_grad_() for _ in range(3))
        dy = torch.rand(1, 8, 1024, 64, dtype=dtype).mul(2).sub(1)
        for name, fn in (("eager", attention), ("torch.compile", compiled)):
            def step():
                q.grad = k.grad = v.grad = None
                fn(q, k, v).backward(dy)
            print(f"{str(dtype).split('.')[1]} {name}: forward and backward median {median_ms(step, args.repeat):.3f} ms")


if __name__ == "__main__":
    main()
