#!/usr/bin/env python3
"""Runs the rows of a `kiln bench` JSON file with PyTorch, eager and torch.compile, on the
same machine and device, and merges `torch_eager_ms` and `torch_compile_ms` into it, so
that every ratio comes from one machine.

    kiln bench --json kiln.json            # first, on this machine
    python3 bench/compare_torch.py kiln.json [-o merged.json] [--device cpu|cuda]

Each row is rebuilt from the argument shapes kiln recorded in the JSON (`arguments`),
timed like kiln times it (a warm-up, then the median of `repeat` runs), with as many
threads as kiln used. torch.compile's compile time is in the warm-up, not the median. A
row torch.compile cannot handle gets `torch_compile_ms: null` and the reason in
`torch_compile_error`.

The PyTorch rows run after kiln's, not interleaved with them: compare ratios from one
file, and rerun both where the machine is noisy. On the CPU, PyTorch allocates every
result afresh (256 MiB per tensor at full size) and the page faults of that memory are
part of its times, as they are for a user; kiln writes into an arena it reuses. PyTorch's
matmuls run on its own oneDNN/MKL, kiln's on the OpenBLAS named in `machine.blas`.
"""
import argparse
import json
import statistics
import sys
import time

ROWS = {"coscos", "chain2", "chain4", "chain8", "chain16", "bias_gelu", "softmax_256", "softmax_4096",
        "softmax_32768", "layernorm", "residual_layernorm", "mlp_forward", "mlp_train_step"}


def fail(message):
    print("compare_torch.py: error: " + message, file=sys.stderr)
    sys.exit(1)


def load_kiln_json(path):
    try:
        with open(path) as f:
            result = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        fail("cannot read %s: %s" % (path, e))
    if not isinstance(result, dict) or "rows" not in result or "machine" not in result:
        fail("%s is not a kiln bench JSON file (no 'machine' and 'rows')" % path)
    for row in result["rows"]:
        if "arguments" not in row:
            fail("%s: row %s has no 'arguments'; rerun kiln bench with this version" % (path, row.get("name")))
    return result


def make_row(torch, name, args, device):
    """The function a row computes and its inputs, from kiln's argument shapes."""
    F = torch.nn.functional
    shape = {a["name"]: a["shape"] for a in args}

    def rand(*dims):
        return torch.rand(*dims, device=device) * 2 - 1

    if name == "coscos":
        return (lambda x: torch.cos(torch.cos(x))), [rand(*shape["x"])]
    if name.startswith("chain"):
        n = int(name[len("chain"):])

        def chain(x):
            for k in range(n):  # the same ops and constants as kiln's rows
                x = [lambda v: v + 0.5, lambda v: v * 1.5, lambda v: v - 0.25, lambda v: v * 0.75][k % 4](x)
            return x
        return chain, [rand(*shape["x"])]
    if name == "bias_gelu":
        return (lambda x, b: F.gelu(x + b)), [rand(*shape["x"]), rand(*shape["b"])]
    if name.startswith("softmax_"):
        return (lambda x: torch.softmax(x, dim=-1)), [rand(*shape["x"])]
    if name == "layernorm":
        width = shape["x"][-1]
        return (lambda x, s, b: F.layer_norm(x, (width,), s, b, 1e-5)), [rand(*shape["x"]), rand(width), rand(width)]
    if name == "residual_layernorm":
        width = shape["x"][-1]

        def residual(x, r, s, b):
            h = x + r
            return h, F.layer_norm(h, (width,), s, b, 1e-5)
        return residual, [rand(*shape["x"]), rand(*shape["r"]), rand(width), rand(width)]
    if name in ("mlp_forward", "mlp_train_step"):
        batch = shape["x"][0]
        torch.manual_seed(7)
        model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 10)).to(device)
        x = rand(batch, 784)
        if name == "mlp_forward":
            def forward(x):
                with torch.no_grad():
                    return model(x)
            return forward, [x]
        labels = torch.randint(0, 10, (batch,), device=device)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

        def train_step(x, labels):
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), labels)
            loss.backward()
            optimizer.step()
            return loss
        return train_step, [x, labels]
    raise KeyError(name)


def median_ms(torch, fn, inputs, repeat, device):
    def once():
        start = time.perf_counter()
        fn(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - start) * 1e3
    once()  # warm-up (and, for torch.compile, compilation)
    once()
    return statistics.median(once() for _ in range(repeat))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kiln_json", help="a JSON file written by kiln bench --json")
    parser.add_argument("-o", "--output", help="where to write the merged JSON (default: over the input)")
    parser.add_argument("--device", choices=["cpu", "cuda"], help="default: the JSON's target")
    parser.add_argument("--repeat", type=int, help="timed runs per row (default: the JSON's)")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    options = parser.parse_args()

    result = load_kiln_json(options.kiln_json)
    device = options.device or ("cuda" if result.get("target") == "cuda" else "cpu")
    repeat = options.repeat or result.get("repeat", 20)
    try:
        import torch
    except ImportError:
        fail("PyTorch is not installed (pip install torch)")
    if device == "cuda" and not torch.cuda.is_available():
        fail("--device=cuda, but PyTorch sees no CUDA device")
    if device == "cpu":
        torch.set_num_threads(result.get("threads") or result["machine"]["cores"])
    result["torch"] = {"version": torch.__version__, "device": device, "threads": torch.get_num_threads(), "repeat": repeat,
                       "mkl": torch.backends.mkl.is_available(), "mkldnn": torch.backends.mkldnn.is_available()}

    print("%-20s %12s %14s %16s %10s %10s" % ("row", "kiln ms", "torch eager ms", "torch.compile ms", "vs eager", "vs compile"))
    for row in result["rows"]:
        name = row["name"]
        if name not in ROWS:
            print("%-20s (no PyTorch version of this row)" % name, file=sys.stderr)
            continue
        print("%s: eager" % name, file=sys.stderr)
        fn, inputs = make_row(torch, name, row["arguments"], device)
        row["torch_eager_ms"] = median_ms(torch, fn, inputs, repeat, device)
        row["torch_compile_ms"] = None
        if not options.no_compile:
            print("%s: torch.compile" % name, file=sys.stderr)
            fn, inputs = make_row(torch, name, row["arguments"], device)
            try:
                row["torch_compile_ms"] = median_ms(torch, torch.compile(fn), inputs, repeat, device)
            except Exception as e:  # a backend failure is a result to report, not a crash
                row["torch_compile_error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")
        eager, compiled, kiln = row["torch_eager_ms"], row["torch_compile_ms"], row["fused_ms"]
        print("%-20s %12.3f %14.3f %16s %9.2fx %10s" % (
            name, kiln, eager, "%.3f" % compiled if compiled else "-", eager / kiln,
            "%.2fx" % (compiled / kiln) if compiled else "-"))

    with open(options.output or options.kiln_json, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
