"""sweep_check.py KILN DIR a,b,c [time]: compiles each DIR/NAME.onnx with KILN, runs it on
its inputs, prints the max-norm relative error against ONNX Runtime's outputs and, with
`time`, kiln bench's median beside ONNX Runtime's (2 threads, 10 runs)."""
import sys, os, types, subprocess, tempfile, time, json
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
import numpy as np
import onnx_models as om
kiln = sys.argv[1]; d = sys.argv[2]; names = sys.argv[3].split(",")
timing = len(sys.argv) > 4
args = types.SimpleNamespace(dir=d, target="cpu", precision="f32", threads=2, repeat=10, warmup=2)
for m in names:
    with tempfile.TemporaryDirectory() as work:
        t = time.time()
        try:
            row, art, flags = om.kiln_figures(kiln, m, os.path.join(d, m + ".onnx"), work, args)
        except subprocess.CalledProcessError as e:
            print(f"{m}: FAILED {' '.join(e.cmd[:2])} rc={e.returncode}", flush=True); continue
        except SystemExit as e:
            print(f"{m}: FAILED {e}", flush=True); continue
        err = max(row["max_rel_error"].values())
        line = f"{m}: err {err:.2e} compile {row['compile_s']:.1f}s"
        if timing:
            k = om.kiln_bench_ms(kiln, art, flags, work, args)
            s, _ = om.ort_session(os.path.join(d, m + ".onnx"), args)
            feeds = dict(np.load(os.path.join(d, m + ".inputs.npz")))
            time.sleep(1)
            o = om.median_ms(lambda: s.run(None, feeds), 2, 10)
            line += f" kiln {k:.2f} ms ort {o:.2f} ms ort/kiln {o/k:.2f}"
        print(line, flush=True)
