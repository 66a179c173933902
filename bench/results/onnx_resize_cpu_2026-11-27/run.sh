#!/usr/bin/env bash
# Resize ×2 on the CPU: the matmul with an [in, out] weight matrix (kiln_old, the commit
# before) against the sum of 2 or 4 gathered taps (kiln_new), on the 2-core development VM.
# The models (PyPI onnx, for export only):
python3 - <<'PY'
import onnx, numpy as np
from onnx import helper, TensorProto, numpy_helper
for name, shape, mode in [("bilinear_64x128", [1,64,128,128], "linear"), ("bilinear_256x32", [1,256,32,32], "linear"), ("cubic_32x64", [1,32,64,64], "cubic")]:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape[:2] + [shape[2]*2, shape[3]*2])
    scales = numpy_helper.from_array(np.array([1,1,2,2], dtype=np.float32), "scales")
    g = helper.make_graph([helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode)], name, [x], [y], [scales])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{name}.onnx")
PY
for v in old new; do for m in bilinear_64x128 bilinear_256x32 cubic_32x64; do
  /tmp/kiln_$v compile $m.onnx -o ${m}_$v.kiln > /dev/null; done; done
for r in 1 2; do for m in bilinear_64x128 bilinear_256x32 cubic_32x64; do for v in old new; do
  echo "$r $m $v $(/tmp/kiln_new bench ${m}_$v.kiln --repeat=30 --warmup=3 | grep -E '^latency' | sed 's/.*median \([0-9.]*\) ms.*/\1/')"
done; done; done | tee times.txt
