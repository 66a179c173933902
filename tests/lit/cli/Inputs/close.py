"""Exits 0 when two float32 .npy files of one shape agree within rtol 1e-5, atol 1e-6, or
within rtol and atol both the third argument where given."""
import struct
import sys

def load(path):
    data = open(path, "rb").read()
    n = struct.unpack("<H", data[8:10])[0]
    body = data[10 + n:]
    return struct.unpack("<%df" % (len(body) // 4), body), data[:10 + n]

(a, ha), (b, hb) = load(sys.argv[1]), load(sys.argv[2])
rtol, atol = (float(sys.argv[3]),) * 2 if len(sys.argv) > 3 else (1e-5, 1e-6)
ok = ha == hb and all(abs(x - y) <= atol + rtol * abs(y) for x, y in zip(a, b))
sys.exit(0 if ok else 1)
