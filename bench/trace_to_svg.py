#!/usr/bin/env python3
"""Draws one profiled run of a `kiln bench MODEL --profile --trace` file as an SVG timeline:
one bar per step, its width its time, coloured by kind (library calls, memory-bound kernels,
copies), with the largest steps labelled. Standard library only.

    python3 bench/trace_to_svg.py TRACE.json OUT.svg [--run N] [--title TEXT]

Perfetto (ui.perfetto.dev) and chrome://tracing open the trace itself; this is for pages
that want a picture (docs/profiling.md).
"""
import argparse
import json
import sys
from xml.sax.saxutils import escape

COLOURS = {"library": "#4c72b0", "loop": "#dd8452", "reduction": "#55a868", "scatter": "#c44e52", "copy": "#8172b3"}


def fail(message):
    print("trace_to_svg.py: error: " + message, file=sys.stderr)
    sys.exit(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("out")
    parser.add_argument("--run", type=int, default=None, help="the profiled run to draw (default: the median one)")
    parser.add_argument("--title", default=None)
    args = parser.parse_args()
    try:
        with open(args.trace) as f:
            trace = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        fail("cannot read %s: %s" % (args.trace, e))
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    if not events:
        fail("%s has no complete events; write it with kiln bench MODEL --profile --trace" % args.trace)
    runs = {}
    for e in events:
        runs.setdefault(e["args"]["run"], []).append(e)
    totals = sorted((sum(e["dur"] for e in evs), run) for run, evs in runs.items())
    run = args.run if args.run is not None else totals[len(totals) // 2][1]
    if run not in runs:
        fail("no run %d in %s (runs 0 to %d)" % (run, args.trace, len(runs) - 1))
    steps = sorted(runs[run], key=lambda e: e["ts"])
    start = steps[0]["ts"]
    end = max(e["ts"] + e["dur"] for e in steps)
    span = max(end - start, 1e-9)
    width, left, bar_y, bar_h = 1200, 20, 60, 60
    scale = (width - 2 * left) / span
    meta = [e for e in trace["traceEvents"] if e.get("ph") == "M" and e.get("name") == "process_name"]
    title = args.title or (meta[0]["args"]["name"] if meta else args.trace)
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="330" font-family="sans-serif" font-size="12">'
           % width, '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="24" font-size="15">%s</text>' % (left, escape(title)),
           '<text x="%d" y="44" fill="#555">run %d of %d: %.3f ms from its first step to its last</text>'
           % (left, run, len(runs), span / 1000)]
    for e in steps:
        x = left + (e["ts"] - start) * scale
        w = max(e["dur"] * scale, 0.5)
        ops = ", ".join(op.split(" = ")[-1] for op in e["args"].get("ops", []))
        out.append('<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" stroke="white" stroke-width="0.3">'
                   '<title>%s (%s): %.4f ms; %s</title></rect>'
                   % (x, bar_y, w, bar_h, COLOURS.get(e["cat"], "#999"), escape(e["name"]), e["cat"],
                      e["dur"] / 1000, escape(ops)))
    # The largest steps, labelled below the bar, left to right.
    largest = sorted(sorted(steps, key=lambda e: -e["dur"])[:8], key=lambda e: e["ts"])
    for i, e in enumerate(largest):
        x = left + (e["ts"] - start + e["dur"] / 2) * scale
        y = bar_y + bar_h + 22 + 18 * i
        out.append('<line x1="%.2f" y1="%d" x2="%.2f" y2="%d" stroke="#888"/>' % (x, bar_y + bar_h, x, y - 12))
        out.append('<text x="%.2f" y="%d">%s %.3f ms (%.0f%%)</text>'
                   % (x + 3, y, escape(e["name"]), e["dur"] / 1000, 100 * e["dur"] / span))
    for i, (kind, colour) in enumerate(COLOURS.items()):
        out.append('<rect x="%d" y="305" width="12" height="12" fill="%s"/><text x="%d" y="315">%s</text>'
                   % (left + 130 * i, colour, left + 130 * i + 16, kind))
    out.append("</svg>")
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")


main()
