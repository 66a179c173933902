"""Checks bench/compare_torch.py's LLaMA block against kiln's row: the exported row's
weights loaded into the PyTorch module by name, one seeded input, kiln's output
(`kiln run` of the row compiled with those weights) against PyTorch's f32 forward.

    twin_check.py KILN ROWS_DIR WORK_DIR    (ROWS_DIR from kiln bench --suite=models --export)
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import compare_torch as ct  # noqa: E402


def safetensors(path):
    data = open(path, "rb").read()
    size = struct.unpack("<Q", data[:8])[0]
    header, out = json.loads(data[8:8 + size]), {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = np.frombuffer(data[8 + size + begin:8 + size + end], dtype=np.float32)
        out[name] = torch.from_numpy(raw.reshape(entry["shape"]).copy())
    return out


def main():
    kiln, rows, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    row = {"description": open(os.path.join(rows, "llama_block.kir")).readline().lstrip("# ").strip()}
    shape = [int(n) for n in row["description"].rsplit("x: f32[", 1)[1].rstrip("]").split(",")]
    model = ct.llama_block(torch, shape[1], shape[2], ct.llama_sizes(row), False)
    weights = safetensors(os.path.join(rows, "llama_block.safetensors"))
    model.load_state_dict(weights, strict=True)
    torch.manual_seed(0)
    x = torch.rand(*shape) * 2 - 1
    np.save(os.path.join(work, "x.npy"), x.numpy())
    with torch.no_grad():
        expected = model(x).numpy()
    artifact = os.path.join(work, "llama_block.kiln")
    subprocess.run([kiln, "compile", os.path.join(rows, "llama_block.kir"), "--weights",
                    os.path.join(rows, "llama_block.safetensors"), "-o", artifact], check=True, capture_output=True)
    subprocess.run([kiln, "run", artifact, "--input", "x=" + os.path.join(work, "x.npy"), "--output", work],
                   check=True, capture_output=True)
    got = np.load(os.path.join(work, "y.npy"))
    print("llama_block %s: max |kiln - torch| / max |torch| = %.3g (max |torch| %.3g)" %
          (shape, np.abs(got - expected).max() / np.abs(expected).max(), np.abs(expected).max()))


if __name__ == "__main__":
    main()
