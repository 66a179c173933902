"""Compiles the ONNX files of export_models.py with kiln, checks each against ONNX
Runtime's outputs, and times kiln, ONNX Runtime and PyTorch on the same machine:

  onnx_models.py DIR --kiln PATH/TO/kiln [--models a,b] [--threads N] [--repeat N]
                 [--rounds N] [--target cpu|cuda] [--precision f32|bf16|f16] [--json FILE]

Per model: `kiln compile DIR/NAME.onnx` (its wall time), `kiln run` on the fixed inputs
of NAME.inputs.npz and the relative error in max-norm (max |kiln - ort| / max |ort|)
against NAME.ort.npz (ONNX Runtime on the CPU, whatever the target). Then --rounds rounds, each timing in turn `kiln bench NAME.kiln`,
ONNX Runtime (CPUExecutionProvider, all graph optimizations, intra-op threads =
--threads) and PyTorch eager (torch.no_grad, torch.set_num_threads(--threads)): the
median of --repeat runs after a warm-up. On a shared machine one round can be slow for
all three; the ratios are taken per round (paired) and their median reported, beside
the median of each one's round medians. With --target cuda kiln compiles for and runs on the
GPU (f32, TF32 off), PyTorch eager runs there too (synchronized after each run, TF32 off),
and ONNX Runtime uses its CUDAExecutionProvider where the installed package has it, else
the CPU (the JSON says which). With --precision bf16 or f16 kiln compiles with that
--precision (autocast) and PyTorch eager runs under torch.autocast in that type, while
ONNX Runtime stays f32: the error is then against f32 outputs. ONNX names become kiln names as `kiln import`
maps them. Each timing starts after --pause seconds of rest: the OpenMP threads of ONNX
Runtime and PyTorch spin for a while after their last run, and without the rest they
took a core from the kiln process timed after them. Prints a table; --json writes every
figure.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_models  # noqa: E402


def kiln_name(name):
    """What kiln import calls an ONNX value (frontends/onnx/importer.h's kiln_name; the
    numeric suffix on collisions is not needed for these models' inputs and outputs)."""
    name = re.sub(r"[^A-Za-z0-9_.]", "_", name)
    return "_" + name if not name or name[0].isdigit() else name


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def median_ms(run, warmup, repeat):
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def kiln_figures(kiln, model, path, work, args):
    artifact = os.path.join(work, model + ".kiln")
    start = time.perf_counter()
    subprocess.run([kiln, "compile", path, "-o", artifact, f"--target={args.target}",
                    f"--precision={args.precision}"], check=True, stdout=subprocess.DEVNULL)
    compile_s = time.perf_counter() - start
    inputs = np.load(os.path.join(args.dir, model + ".inputs.npz"))
    flags = []
    for name in inputs.files:
        npy = os.path.join(work, kiln_name(name) + ".npy")
        np.save(npy, inputs[name])
        flags += ["--input", f"{kiln_name(name)}={npy}"]
    out = os.path.join(work, model + "_out")
    subprocess.run([kiln, "run", artifact, *flags, "--output", out, "--threads", str(args.threads)], check=True,
                   stdout=subprocess.DEVNULL)
    expected = np.load(os.path.join(args.dir, model + ".ort.npz"))
    errors = {}
    for name in expected.files:
        ort = expected[name].astype(np.float64)
        got = np.load(os.path.join(out, kiln_name(name) + ".npy")).astype(np.float64)
        if got.shape != ort.shape:
            sys.exit(f"{model}: output {name} has shape {got.shape}, ONNX Runtime's {ort.shape}")
        errors[name] = float(np.abs(got - ort).max() / max(np.abs(ort).max(), 1e-30))
    return {"compile_s": compile_s, "artifact_bytes": os.path.getsize(artifact), "max_rel_error": errors}, artifact, flags


def kiln_bench_ms(kiln, artifact, flags, work, args):
    report = os.path.join(work, "bench.json")
    subprocess.run([kiln, "bench", artifact, *flags, f"--repeat={args.repeat}", f"--warmup={args.warmup}",
                    f"--threads={args.threads}", f"--json={report}"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    with open(report) as f:
        bench = json.load(f)
    return bench["latency_ms"]["median"]


def ort_session(path, args):
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    providers = ["CPUExecutionProvider"]
    if args.target == "cuda" and "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        providers.insert(0, "CUDAExecutionProvider")
    session = onnxruntime.InferenceSession(path, options, providers=providers)
    return session, f"{onnxruntime.__version__} {session.get_providers()[0]}"


def torch_model(model, args):
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    build, _ = export_models.MODELS[model]
    module, inputs, _ = build()
    module.eval()
    device = torch.device(args.target)
    if args.target == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        module = module.to(device)
        inputs = tuple(x.to(device) for x in inputs)

    dtype = {"bf16": torch.bfloat16, "f16": torch.float16}.get(args.precision)

    def run():
        with torch.no_grad(), torch.autocast(args.target, dtype=dtype, enabled=dtype is not None):
            module(*inputs)
        if args.target == "cuda":
            torch.cuda.synchronize()

    return run, torch.__version__


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--kiln", required=True)
    parser.add_argument("--models", default=",".join(export_models.MODELS))
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pause", type=float, default=2.0, help="seconds of rest before each timing")
    parser.add_argument("--target", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--precision", choices=["f32", "bf16", "f16"], default="f32")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    failed = []
    machine = {"cpu": cpu_name(), "hardware_threads": os.cpu_count(), "target": args.target,
               "precision": args.precision}
    if args.target == "cuda":
        import torch

        machine["gpu"] = torch.cuda.get_device_name()
    with tempfile.TemporaryDirectory() as work:
        for model in args.models.split(","):
            path = os.path.join(args.dir, model + ".onnx")
            if not os.path.exists(path):
                sys.exit(f"{path} is missing: run bench/export_models.py {args.dir} {model} first")
            print(f"{model}: compiling and checking with kiln ...", file=sys.stderr, flush=True)
            try:
                row, artifact, flags = kiln_figures(args.kiln, model, path, work, args)
            except subprocess.CalledProcessError as error:
                # Its message is on stderr above; the other models still run.
                failed.append(f"{model}: {' '.join(error.cmd[:2])} exited with {error.returncode}")
                continue
            row = {"model": model, **row, "rounds": []}
            feeds = dict(np.load(os.path.join(args.dir, model + ".inputs.npz")))
            session, row["ort_version"] = ort_session(path, args)
            torch_run, row["torch_version"] = torch_model(model, args)
            for r in range(args.rounds):
                print(f"{model}: round {r + 1} of {args.rounds} ...", file=sys.stderr, flush=True)
                # A pause before each: ONNX Runtime's and PyTorch's OpenMP threads spin for
                # a while after their last run, and took a core from the kiln process after them.
                time.sleep(args.pause)
                kiln_ms = kiln_bench_ms(args.kiln, artifact, flags, work, args)
                time.sleep(args.pause)
                ort = median_ms(lambda: session.run(None, feeds), args.warmup, args.repeat)
                time.sleep(args.pause)
                torch_ms = median_ms(torch_run, args.warmup, args.repeat)
                row["rounds"].append({"kiln_ms": kiln_ms, "ort_ms": ort, "torch_eager_ms": torch_ms})
            for key in ("kiln_ms", "ort_ms", "torch_eager_ms"):
                row[key] = statistics.median(x[key] for x in row["rounds"])
            row["ort_over_kiln"] = statistics.median(x["ort_ms"] / x["kiln_ms"] for x in row["rounds"])
            row["torch_over_kiln"] = statistics.median(x["torch_eager_ms"] / x["kiln_ms"] for x in row["rounds"])
            rows.append(row)
    mixed = "" if args.precision == "f32" else " (ONNX Runtime in f32, PyTorch eager under torch.autocast)"
    print(f"target {args.target}; precision {args.precision}{mixed}; "
          f"ONNX Runtime {rows[0]['ort_version'] if rows else ''}")
    width = max([14] + [len(r["model"]) for r in rows])
    print(f"{'model':<{width}} {'kiln ms':>9} {'ORT ms':>9} {'torch ms':>9} {'ORT/kiln':>9} {'torch/kiln':>10}"
          f" {'max rel err':>12} {'compile s':>10}")
    for r in rows:
        print(f"{r['model']:<{width}} {r['kiln_ms']:>9.2f} {r['ort_ms']:>9.2f} {r['torch_eager_ms']:>9.2f}"
              f" {r['ort_over_kiln']:>9.2f} {r['torch_over_kiln']:>10.2f}"
              f" {max(r['max_rel_error'].values()):>12.2e} {r['compile_s']:>10.1f}")
    for line in failed:
        print("failed:", line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine, "threads": args.threads, "repeat": args.repeat, "rounds": args.rounds,
                       "rows": rows, "failed": failed}, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
