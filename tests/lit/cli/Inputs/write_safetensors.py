"""Writes a safetensors file from NAME=DTYPE:SHAPE:VALUES arguments (standard library only)."""
import json
import struct
import sys

out, specs = sys.argv[1], sys.argv[2:]
header, data = {}, b""
formats = {"F32": "f", "F64": "d", "I32": "i", "I64": "q"}
for spec in specs:
    name, rest = spec.split("=")
    dtype, shape, values = rest.split(":")
    shape = [int(d) for d in shape.split(",") if d]
    raw = struct.pack("<%d%s" % (len(values.split(",")), formats[dtype]), *[float(v) if dtype[0] == "F" else int(v) for v in values.split(",")])
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
blob = json.dumps(header).encode()
with open(out, "wb") as f:
    f.write(struct.pack("<Q", len(blob)) + blob + data)
