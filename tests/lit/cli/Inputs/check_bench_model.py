"""Checks `kiln bench MODEL --profile` output: every JSON field of the right type and in
range, the profiled steps adding up to their runs, and a Chrome trace with one complete
event per step per profiled run. Timings are not judged."""
import json
import sys

LATENCY = ["median", "p90", "p99", "min", "max", "mean"]
STEP = {"name": str, "kind": str, "ops": list, "inputs": list, "outputs": list, "ms": (int, float),
        "bytes": int, "gbps": (int, float), "fraction_of_copy": (int, float), "flops": int, "tflops": (int, float)}
KINDS = {"loop", "reduction", "library", "scatter", "copy"}


def fail(message):
    print("check_bench_model: " + message)
    sys.exit(1)


def main(json_path, trace_path):
    with open(json_path) as f:
        r = json.load(f)
    for key, kind in [("model", str), ("target", str), ("device", str), ("arena_bytes", int), ("runs", int),
                      ("throughput_per_s", (int, float)), ("latency_clock", str), ("steps", list)]:
        if not isinstance(r.get(key), kind):
            fail("field %s is %r" % (key, r.get(key)))
    expected_pages = (None,) if r["target"] == "cuda" else ("always", "madvise", "never", "unknown")
    if r.get("huge_pages", "absent") not in expected_pages:
        fail("huge_pages is %r on %s" % (r.get("huge_pages", "absent"), r["target"]))
    # The CPU kernels' --cpu (one of the default list's), none on CUDA.
    expected_code = (None,) if r["target"] == "cuda" else ("x86-64-v3", "x86-64-v4", "x86-64-v4+avx512bf16")
    if r.get("code", "absent") not in expected_code:
        fail("code is %r on %s" % (r.get("code", "absent"), r["target"]))
    if r["compile_s"] is not None and not r["compile_s"] > 0:
        fail("compile_s is %r" % r["compile_s"])
    lat = r["latency_ms"]
    if sorted(lat) != sorted(LATENCY) or not all(lat[k] > 0 for k in LATENCY):
        fail("latency_ms is %r" % lat)
    if not lat["min"] <= lat["median"] <= lat["p90"] <= lat["p99"] <= lat["max"]:
        fail("latency_ms out of order: %r" % lat)
    if abs(r["throughput_per_s"] - 1000 / lat["median"]) > 1e-6 * r["throughput_per_s"]:
        fail("throughput_per_s is not 1000 / median")
    steps = r["steps"]
    if not steps or steps[-1]["kind"] != "copy":
        fail("no steps, or the last is not the copies")
    for s in steps:
        for key, kind in STEP.items():
            if not isinstance(s.get(key), kind):
                fail("step %s: field %s is %r" % (s.get("name"), key, s.get(key)))
        if s["kind"] not in KINDS or s["ms"] < 0 or s["bytes"] < 0 or s["flops"] < 0:
            fail("step %s out of range: %r" % (s["name"], s))
        if s["kind"] != "copy" and (not s["ops"] or not all(" = " in op for op in s["ops"])):
            fail("step %s has no ops: %r" % (s["name"], s["ops"]))
    p = r["profile"]
    if abs(p["steps_ms"] - sum(s["ms"] for s in steps)) > 1e-9 + 1e-6 * p["steps_ms"]:
        fail("steps_ms is not the sum of the steps")
    parts = p["memory_bound_ms"] + p["library_ms"] + p["other_ms"]
    if abs(parts - p["steps_ms"]) > 1e-9 + 1e-6 * p["steps_ms"]:
        fail("memory-bound, library and other do not make steps_ms")
    allowed = 0.1 * p["profiled_run_ms"] + p["per_step_overhead_ms"] * len(steps)
    if not p["adds_up"] or abs(p["unaccounted_ms"]) > allowed:
        fail("the steps do not add up to their run: %r" % p)
    if not p["copy_gbps"] > 0 or p["runs"] != r["runs"]:
        fail("bad copy or runs: %r" % p)
    with open(trace_path) as f:
        trace = json.load(f)
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    if len(complete) != len(steps) * p["runs"]:
        fail("%d complete events for %d steps and %d runs" % (len(complete), len(steps), p["runs"]))
    for e in complete:
        if e["dur"] < 0 or e["ts"] < 0 or "ops" not in e["args"] or "bytes" not in e["args"]:
            fail("bad event %r" % e)
    names = [e["name"] for e in complete[:len(steps)]]
    if names != [s["name"] for s in steps]:
        fail("the trace's steps %s are not the profile's" % names)
    print("check_bench_model: %d steps, %d runs, trace OK" % (len(steps), p["runs"]))


main(sys.argv[1], sys.argv[2])
