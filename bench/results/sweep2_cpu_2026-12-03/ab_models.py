"""ab_models.py OLD_KILN NEW_KILN DIR a,b,c: each binary compiles DIR/NAME.onnx, then both
artifacts are timed in turn (kiln bench, 2 threads, median of 20, two rounds: old, new,
new, old) beside ONNX Runtime's median in the same run; prints the medians, new/old and
ORT/new."""
import os, sys, types, tempfile, time
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "../.."))
import numpy as np
import onnx_models as om
old, new, d, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(",")
args = types.SimpleNamespace(dir=d, target="cpu", precision="f32", threads=2, repeat=20, warmup=3)
for m in names:
    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(d, m + ".onnx")
        try:
            arts = {}
            for tag, k in (("old", old), ("new", new)):
                sub = os.path.join(work, tag)
                os.makedirs(sub)
                row, art, flags = om.kiln_figures(k, m, path, sub, args)
                arts[tag] = (k, art, flags, sub)
        except Exception as e:
            print(f"{m}: FAILED {e}", flush=True)
            continue
        t = {"old": [], "new": []}
        for tag in ("old", "new", "new", "old"):
            k, art, flags, sub = arts[tag]
            t[tag].append(om.kiln_bench_ms(k, art, flags, sub, args))
        s, _ = om.ort_session(path, args)
        feeds = dict(np.load(os.path.join(d, m + ".inputs.npz")))
        o = om.median_ms(lambda: s.run(None, feeds), 3, 20)
        o_ms, n_ms = min(t["old"]), min(t["new"])
        print(f"{m}: old {t['old'][0]:.2f} {t['old'][1]:.2f} ms, new {t['new'][0]:.2f} {t['new'][1]:.2f} ms, "
              f"new/old {n_ms / o_ms:.2f}, ort {o:.2f} ms, ort/new {o / n_ms:.2f}", flush=True)
