"""Writes a float32 .npy file: write_npy.py OUT SHAPE VALUES (standard library only)."""
import struct
import sys

out, shape, values = sys.argv[1], [int(d) for d in sys.argv[2].split(",")], [float(v) for v in sys.argv[3].split(",")]
dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % dims
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
with open(out, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + struct.pack("<%df" % len(values), *values))
