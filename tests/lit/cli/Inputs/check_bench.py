"""Checks that `kiln bench` JSON and SVG files are well formed: every row of the suite
present once, every field of the right type and in range. Timings are not judged."""
import json
import sys
import xml.etree.ElementTree as ET

ROWS = ["coscos", "chain2", "chain4", "chain8", "chain16", "chain8_bf16", "bias_gelu", "softmax_256", "softmax_4096",
        "softmax_32768", "softmax_4096_bf16", "layernorm", "residual_layernorm", "mlp_forward", "mlp_train_step"]
POSITIVE = ["fused_ms", "unfused_ms", "fused_min_ms", "fused_max_ms", "bytes", "fused_gbps", "fraction_of_copy",
            "copy_gbps", "speedup"]
COUNTS = ["kernels_fused", "kernels_unfused", "arena_bytes"]


def fail(message):
    print("check_bench: " + message)
    sys.exit(1)


def main(json_path, svg_path):
    with open(json_path) as f:
        result = json.load(f)
    machine = result["machine"]
    if not isinstance(machine["cpu"], str) or machine["cores"] < 1 or "gpu" not in machine or "OpenBLAS" not in machine["blas"]:
        fail("bad machine: %r" % machine)
    if result["target"] != "cpu" or result["copy_gbps"] <= 0:
        fail("bad target or copy_gbps")
    names = [row["name"] for row in result["rows"]]
    if names != ROWS:
        fail("rows %s, expected %s" % (names, ROWS))
    for row in result["rows"]:
        if row["target"] != "cpu":
            fail("%s: target %r" % (row["name"], row["target"]))
        for key in POSITIVE:
            if not isinstance(row[key], (int, float)) or row[key] <= 0:
                fail("%s: %s = %r" % (row["name"], key, row[key]))
        for key in COUNTS:
            if not isinstance(row[key], int) or row[key] < 0:
                fail("%s: %s = %r" % (row["name"], key, row[key]))
        if not row["fused_min_ms"] <= row["fused_ms"] <= row["fused_max_ms"]:
            fail("%s: median outside [min, max]" % row["name"])
        if row["kernels_fused"] > row["kernels_unfused"]:
            fail("%s: more kernels fused (%d) than unfused (%d)" % (row["name"], row["kernels_fused"], row["kernels_unfused"]))
    svg = ET.parse(svg_path).getroot()
    texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    for name in ROWS:
        if name not in texts:
            fail("the chart has no label %s" % name)
    print("check_bench: %d rows OK" % len(names))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
