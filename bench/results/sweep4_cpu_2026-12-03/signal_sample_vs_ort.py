"""GridSample, DFT and STFT in many variants, kiln against ONNX Runtime:
signal_sample_vs_ort.py KILN. Each case is one-node model with random inputs (grids past
[-1, 1] by half, so every padding mode is exercised); prints the max-norm relative error.
A one-sided inverse DFT (irfft) given a dft_length is checked against ONNX's reference
(numpy's irfft, as PyTorch computes it): ONNX Runtime 1.32 differs from both there, and
refuses a real spectrum."""
import os, sys, subprocess, tempfile, itertools
import numpy as np, onnx, onnxruntime
from onnx import helper, TensorProto

kiln = sys.argv[1]
rng = np.random.default_rng(0)

def check(name, node, inputs, outputs, feeds, opset, consts=(), reference=False):
    graph = helper.make_graph([node], name, inputs, outputs, initializer=list(consts))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.onnx"); onnx.save(model, path)
        if reference:
            from onnx.reference import ReferenceEvaluator
            want = ReferenceEvaluator(model).run(None, feeds)[0]
            name += " (against ONNX's reference)"
        else:
            want = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        r = subprocess.run([kiln, "compile", path, "-o", os.path.join(d, "m.kiln")], capture_output=True, text=True)
        if r.returncode:
            print(f"{name}: COMPILE FAILED {r.stderr.strip()[:200]}"); return
        flags = []
        for k, v in feeds.items():
            np.save(os.path.join(d, k + ".npy"), v); flags += ["--input", f"{k}={os.path.join(d, k + '.npy')}"]
        subprocess.run([kiln, "run", os.path.join(d, "m.kiln"), *flags, "--output", os.path.join(d, "out")], check=True,
                       stdout=subprocess.DEVNULL)
        got = np.load(os.path.join(d, "out", outputs[0].name + ".npy"))
        if got.shape != want.shape:
            print(f"{name}: SHAPE {got.shape} vs {want.shape}"); return
        err = np.abs(got.astype(np.float64) - want).max() / max(np.abs(want).max(), 1e-30)
        print(f"{name}: err {err:.2e} {'OK' if err < 1e-5 else 'BAD'}", flush=True)

f32 = TensorProto.FLOAT
for dims, mode, pad, align in itertools.product([1, 2, 3], ["nearest", "linear", "cubic"], ["zeros", "border", "reflection"], [0, 1]):
    if dims != 2 and mode == "cubic":
        continue  # onnxruntime's cubic is 2-D only
    if dims == 1:
        continue  # onnxruntime takes 2-D and 3-D
    spatial = [5, 7, 4][:dims]
    out = [6, 3, 5][:dims]
    x = rng.standard_normal([2, 3] + spatial).astype(np.float32)
    g = rng.uniform(-1.5, 1.5, [2] + out + [dims]).astype(np.float32)
    node = helper.make_node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=pad, align_corners=align)
    check(f"gridsample_{dims}d_{mode}_{pad}_align{align}", node,
          [helper.make_tensor_value_info("x", f32, x.shape), helper.make_tensor_value_info("g", f32, g.shape)],
          [helper.make_tensor_value_info("y", f32, None)], {"x": x, "g": g}, 20)
for parts, inverse, onesided, length, axis in [(1, 0, 0, None, 1), (1, 0, 1, None, 1), (2, 0, 0, None, -2), (2, 1, 0, None, 1),
                                               (1, 0, 0, 12, 1), (2, 0, 0, 5, 2), (1, 0, 1, 9, -2), (2, 1, 0, 16, 2),
                                               (2, 1, 1, None, 1), (2, 1, 1, 9, 1), (2, 1, 1, 20, 2), (1, 1, 1, 16, 1)]:
    x = rng.standard_normal([2, 8, 10, parts]).astype(np.float32)
    ins = ["x", "len" if length else "", "axis"]
    consts = [helper.make_tensor("axis", TensorProto.INT64, [], [axis])]
    if length:
        consts.append(helper.make_tensor("len", TensorProto.INT64, [], [length]))
    node = helper.make_node("DFT", ins, ["y"], inverse=inverse, onesided=onesided)
    check(f"dft_parts{parts}_inv{inverse}_one{onesided}_len{length}_axis{axis}", node,
          [helper.make_tensor_value_info("x", f32, x.shape)], [helper.make_tensor_value_info("y", f32, None)], {"x": x}, 20,
          consts, reference=bool(inverse and onesided and (length or parts == 1)))
for parts, step, frame, onesided, window in [(1, 4, 16, 1, True), (1, 3, 10, 0, False), (2, 5, 8, 0, True)]:
    s = rng.standard_normal([2, 64, parts]).astype(np.float32)
    consts = [helper.make_tensor("step", TensorProto.INT64, [], [step]), helper.make_tensor("frame", TensorProto.INT64, [], [frame])]
    if window:
        consts.append(helper.make_tensor("w", f32, [frame], np.hanning(frame).astype(np.float32)))
    node = helper.make_node("STFT", ["s", "step", "w" if window else "", "frame"], ["y"], onesided=onesided)
    check(f"stft_parts{parts}_step{step}_frame{frame}_one{onesided}_window{int(window)}", node,
          [helper.make_tensor_value_info("s", f32, s.shape)], [helper.make_tensor_value_info("y", f32, None)], {"s": s}, 17,
          consts)
