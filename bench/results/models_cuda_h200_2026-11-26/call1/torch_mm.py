import torch, statistics
def bench(f, n=30):
    for _ in range(5): f()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); f(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    return statistics.median(ts)
n = 4096
for dt, prec in ((torch.float32, "highest"), (torch.float32, "high"), (torch.bfloat16, "highest"), (torch.float16, "highest")):
    torch.set_float32_matmul_precision(prec)
    a = torch.rand(n, n, device="cuda", dtype=dt) * 2 - 1
    b = torch.rand(n, n, device="cuda", dtype=dt) * 2 - 1
    c = torch.empty(n, n, device="cuda", dtype=dt)
    ms = bench(lambda: torch.matmul(a, b, out=c))
    print(f"torch matmul 4096^3 {dt} precision={prec}: {ms:.3f} ms, {2*n**3/ms/1e9:.1f} TFLOP/s")
x = torch.empty(2**28 // 4, device="cuda"); y = torch.empty_like(x)
ms = bench(lambda: y.copy_(x))
print(f"torch copy 256 MiB: {ms:.3f} ms, {2*x.numel()*4/ms/1e6:.0f} GB/s")
