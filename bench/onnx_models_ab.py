"""Times two kiln builds against each other and against ONNX Runtime on the ONNX files of
export_models.py, paired round by round:

  onnx_models_ab.py DIR --before PATH/TO/kiln --after PATH/TO/kiln [--models a,b]
                    [--rounds N] [--threads N] [--json FILE]

Each build compiles each model itself (`kiln compile DIR/NAME.onnx`; a build that cannot
is reported and left out). Then per round and model, in turn: `kiln bench` of the before
and after artifacts and ONNX Runtime (CPUExecutionProvider, intra-op threads =
--threads), each the median of 20 runs after 3 of warm-up, with a second of rest before
each. The table gives each one's median over rounds and the medians of the per-round
ratios. Needs numpy and onnxruntime from PyPI (comparison only).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_models  # noqa: E402
from onnx_models import kiln_name  # noqa: E402


def kiln_ms(kiln, artifact, inputs, work):
    report = os.path.join(work, "bench.json")
    flags = [f"--input={name}={path}" for name, path in inputs.items()]
    subprocess.run([kiln, "bench", artifact, "--threads=2", "--repeat=20", "--warmup=3", "--json", report, *flags],
                   capture_output=True, check=True)
    with open(report) as f:
        return json.load(f)["latency_ms"]["median"]


def ort_ms(path, feeds, threads):
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    for _ in range(3):
        session.run(None, feeds)
    times = []
    for _ in range(20):
        start = time.perf_counter()
        session.run(None, feeds)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--before", required=True)
    parser.add_argument("--after", required=True)
    parser.add_argument("--models", default=",".join(export_models.MODELS))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json")
    args = parser.parse_args()
    work = tempfile.mkdtemp()
    builds = {"before": args.before, "after": args.after}
    results, feeds, inputs = {}, {}, {}
    for model in args.models.split(","):
        path = os.path.join(args.dir, model)
        arrays = np.load(f"{path}.inputs.npz")
        feeds[model] = {name: arrays[name] for name in arrays.files}
        inputs[model] = {}
        for name, value in feeds[model].items():
            inputs[model][kiln_name(name)] = os.path.join(work, f"{model}.{name}.npy")
            np.save(inputs[model][kiln_name(name)], value)
        results[model] = {"before": [], "after": [], "ort": []}
        for tag, kiln in builds.items():
            compiled = subprocess.run([kiln, "compile", f"{path}.onnx", "-o", os.path.join(work, f"{model}.{tag}.kiln")],
                                      capture_output=True, text=True)
            if compiled.returncode != 0:
                print(f"{model}: the {tag} build cannot compile it: {compiled.stderr.strip()[:300]}", flush=True)
                results[model][tag] = None
    for round_index in range(args.rounds):
        for model, times in results.items():
            for tag, kiln in builds.items():
                if times[tag] is None:
                    continue
                time.sleep(1)
                times[tag].append(kiln_ms(kiln, os.path.join(work, f"{model}.{tag}.kiln"), inputs[model], work))
            time.sleep(1)
            times["ort"].append(ort_ms(os.path.join(args.dir, f"{model}.onnx"), feeds[model], args.threads))
            print(f"round {round_index + 1}: {model}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)

    def ratio(a, b):
        return statistics.median([x / y for x, y in zip(a, b)]) if a and b else float("nan")

    print(f"{'model':20s} {'before ms':>10s} {'after ms':>10s} {'ORT ms':>10s} {'after/before':>13s} "
          f"{'ORT/after':>10s} {'ORT/before':>11s}")
    for model, t in results.items():
        med = {k: statistics.median(v) if v else float("nan") for k, v in t.items()}
        print(f"{model:20s} {med['before']:10.2f} {med['after']:10.2f} {med['ort']:10.2f} "
              f"{ratio(t['after'], t['before']):13.2f} {ratio(t['ort'], t['after']):10.2f} "
              f"{ratio(t['ort'], t['before']):11.2f}")


if __name__ == "__main__":
    main()
