"""Times two kiln builds against each other and against ONNX Runtime on the ONNX files of
export_models.py, paired round by round:

  onnx_models_ab.py DIR --before PATH/TO/kiln --after PATH/TO/kiln [--models a,b]
                    [--rounds N] [--threads N] [--repeat N] [--warmup N] [--json FILE]

Each build compiles each model itself (`kiln compile DIR/NAME.onnx`; a build that cannot
is reported and left out). Then per round and model, in turn: `kiln bench` of the before
and after artifacts and ONNX Runtime (CPUExecutionProvider, intra-op threads =
--threads), each the median of --repeat runs after --warmup (20 and 3) with the timing
helpers of onnx_models.py, and a second of rest before each. The table gives each one's
median over rounds and the medians of the per-round ratios. Needs numpy and onnxruntime
from PyPI (comparison only).
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_models  # noqa: E402
from onnx_models import kiln_bench_ms, kiln_name, median_ms, ort_session  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--before", required=True)
    parser.add_argument("--after", required=True)
    parser.add_argument("--models", default=",".join(export_models.MODELS))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--json")
    # The CPU only: onnx_models.py's helpers read the target.
    parser.set_defaults(target="cpu")
    args = parser.parse_args()
    work = tempfile.mkdtemp()
    builds = {"before": args.before, "after": args.after}
    results, feeds, flags = {}, {}, {}
    for model in args.models.split(","):
        path = os.path.join(args.dir, model)
        arrays = np.load(f"{path}.inputs.npz")
        feeds[model] = {name: arrays[name] for name in arrays.files}
        flags[model] = []
        for name, value in feeds[model].items():
            npy = os.path.join(work, f"{model}.{kiln_name(name)}.npy")
            np.save(npy, value)
            flags[model] += ["--input", f"{kiln_name(name)}={npy}"]
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
                times[tag].append(kiln_bench_ms(kiln, os.path.join(work, f"{model}.{tag}.kiln"), flags[model], work, args))
            time.sleep(1)
            session, _ = ort_session(os.path.join(args.dir, f"{model}.onnx"), args)
            times["ort"].append(median_ms(lambda: session.run(None, feeds[model]), args.warmup, args.repeat))
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
