"""Writes an MLP for the serving load test as kiln text IR and its random weights as
safetensors (standard library only; fixed seed):

  serve_models.py DIR NAME BATCH IN,HIDDEN..,OUT    e.g. serve_models.py out small 64 64,128,10

gives DIR/NAME_bBATCH.kir (x: f32[BATCH,IN] -> relu layers -> logits) and DIR/NAME.safetensors.
"""
import json
import os
import random
import struct
import sys

out, name, batch, dims = sys.argv[1], sys.argv[2], int(sys.argv[3]), [int(d) for d in sys.argv[4].split(",")]
rng = random.Random(1)
params, lines, tensors = [], [], {}
value = "%x"
for i, (fan_in, fan_out) in enumerate(zip(dims, dims[1:])):
    params += [f"param %w{i}: f32[{fan_in},{fan_out}]", f"param %b{i}: f32[{fan_out}]"]
    bound = (1.0 / fan_in) ** 0.5
    tensors[f"w{i}"] = ([fan_in, fan_out], [rng.uniform(-bound, bound) for _ in range(fan_in * fan_out)])
    tensors[f"b{i}"] = ([fan_out], [rng.uniform(-bound, bound) for _ in range(fan_out)])
    last = i == len(dims) - 2
    result = "%logits" if last else f"%h{i}"
    lines.append(f"  {result}{'' if last else '_pre'}: f32[{batch},{fan_out}] = linear({value}, %w{i}, %b{i})")
    if not last:
        lines.append(f"  {result}: f32[{batch},{fan_out}] = relu({result}_pre)")
    value = result
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, f"{name}_b{batch}.kir"), "w") as f:
    f.write(f"graph @{name}(%x: f32[{batch},{dims[0]}], " + ", ".join(params) + ") {\n")
    f.write("\n".join(lines) + "\n  return %logits\n}\n")
header, offset, blobs = {}, 0, []
for key, (shape, values) in tensors.items():
    blob = struct.pack(f"<{len(values)}f", *values)
    header[key] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
    offset += len(blob)
    blobs.append(blob)
text = json.dumps(header).encode()
text += b" " * ((8 - len(text) % 8) % 8)
with open(os.path.join(out, f"{name}.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
