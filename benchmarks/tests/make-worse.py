#!/usr/bin/env python3
"""make-worse.py IN.json OUT.json PCT [MODE] - a copy of a benchmark run in which every figure of
every latency MODE entry (default oneway: the one-way wakeups of every peer and scenario) is PCT
percent worse: p50 ... max, min, mean, their spreads and per-round values, and the histogram's
bucket latencies. For the compare test: `compare IN OUT --fail-on 'wakeup one-way p99'` must fail."""

import json
import sys


def worsen(node, factor):
    """Scale every latency figure (keys ending in _ns, their _spread, the histogram's x)."""
    for k, v in node.items():
        if k == "histogram":
            node[k] = [[b * factor, c] for b, c in v]
        elif k.endswith("_ns") and isinstance(v, (int, float)):
            node[k] = v * factor
        elif k.endswith("_ns_spread") and isinstance(v, dict):
            for s in ("min", "max"):
                v[s] = v[s] * factor
            v["values"] = [x * factor for x in v["values"]]


def visit(node, mode, factor, hits):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == mode and isinstance(v, dict) and "histogram" in v:
                worsen(v, factor)
                hits.append(k)
            else:
                visit(v, mode, factor, hits)


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    src, dst, pct = sys.argv[1], sys.argv[2], float(sys.argv[3])
    mode = sys.argv[4] if len(sys.argv) == 5 else "oneway"
    d = json.load(open(src))
    hits = []
    for sec, body in d.items():
        if sec.startswith("latency"):
            visit(body, mode, 1 + pct / 100, hits)
    if not hits:
        sys.exit(f"make-worse.py: no latency '{mode}' entry in {src}")
    with open(dst, "w") as f:
        json.dump(d, f)
    print(f"make-worse.py: {len(hits)} {mode} entries made {pct:g}% worse in {dst}")


main()
