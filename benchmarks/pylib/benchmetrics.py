"""The figures of benchmark JSON files as a flat list of named metrics (standard library only).

Files understood (by their content, not their name):
  crunloop-bench   latest.json of benchmarks/run: every number K that has a K_spread sibling
                   ({min, max, rounds, values}: one value per round) is a metric with rounds;
                   instructions_per_pass entries ("PEER/SCENARIO") are metrics without rounds.
                   New sections and deeper paths (latency scenarios) are picked up the same way.
  http             http.json of benchmarks/http/bench: per server and connection count
                   (spreads are [min, max] only: no rounds).
  swift-layer      swift-layer.json of swift-wrapper-bench: per variant (no rounds).

Naming. A metric's full name is "PEER: NAME" (or NAME alone for a figure of no peer, such as a
ratio between two servers). NAME is made from the JSON path: the benchmark's label
(latency -> "wakeup", throughput -> "signal", timer_heap -> "timers", ...), then the path's
other components (the peer taken out; oneway -> "one-way", pingpong -> "ping-pong",
producers_4 -> "4 producers", loops_2 -> "2 loops"), then the figure's key with its unit
suffix read as a unit (p99_ns -> "p99" in ns, ns_per_op -> "ns/op", callbacks_per_s ->
"callbacks/s", p999 -> "p99.9"). Examples: "CRunLoop: wakeup one-way p99",
"libuv: timers 1e4 add ns/op", "CRunLoop: spin 50 us one-way p50", "floor: http requests/s at
100 connections", "Swift layer: swift wakeup latency p99". A latency path with components
beyond today's (a scenario) gets them in parentheses: "wakeup one-way p99 (busy)".
Matching is case-insensitive and ignores repeated blanks. A NAME without "PEER:" means the
default peer: CRunLoop (Swift layer in swift-layer.json), or the figure of no peer. The dotted
JSON path (e.g. latency.peers.CRunLoop.oneway.p99_ns) is accepted too.
"""

import json
import os
import re

DEFAULT_PEERS = ("CRunLoop", "Swift layer")

SECTION_LABEL = {
    "latency": "wakeup",
    "throughput": "signal",
    "timer_heap": "timers",
    "timer_precision": "timer precision",
    "idle": "idle",
    "pass": "pass",
    "many_fds": "fds",
    "memory_per_timer": "memory per timer",
    "fire_rate": "fire rate",
    "cross_thread_timers": "cross-thread timers",
    "loop_scaling": "scaling",
    "perform": "perform",
    "spin": "spin",
    "instructions_per_pass": "pass instructions",
}

# Keys whose values are not measurements (configuration, counts of what was asked for).
CONFIG_KEYS = {"rounds", "samples", "warmup", "n", "producers", "seconds", "timers", "passes",
               "window_s", "tolerance_s", "capped_rounds"}


class Metric:
    __slots__ = ("path", "peer", "name", "value", "lo", "hi", "rounds", "unit", "better",
                 "section", "parts", "stat", "kind")

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))

    @property
    def full(self):
        return f"{self.peer}: {self.name}" if self.peer else self.name

    def __repr__(self):
        return f"<Metric {self.full} = {self.value} {self.unit}>"


def norm(name):
    """Matching form of a name: lower case, single blanks, no blank before ':'."""
    s = re.sub(r"\s+", " ", name.strip().lower())
    return re.sub(r"\s*:\s*", ": ", s)


# ---- units and directions --------------------------------------------------------------------

def unit_of(key):
    k = key.lower()
    if k.endswith("_ns_per_s"):
        return "ns/s"
    if k.endswith("_per_s") or k.endswith("per_second"):
        return "/s"
    if k.startswith("ns_per") or k.endswith("_ns") or "_ns_per" in k or k == "ns":
        return "ns"
    if k.endswith("_us") or "_us_per" in k:
        return "us"
    if k.endswith("_s") or k.endswith("_seconds"):
        return "s"
    if "bytes" in k:
        return "B"
    if "over" in k or "fraction" in k or "efficiency" in k:
        return "ratio"
    return ""


HIGHER = re.compile(r"(_per_s$|per_second|efficiency|saved_fraction|^fires$|^fired$|^rounds$|"
                    r"^ok$|^timers_armed$|^sends$|^callbacks$|^ops$)")
LOWER = re.compile(r"(_ns$|^ns_per|_s$|_seconds$|_us$|bytes|allocations|frees|_over_|over_same|"
                   r"context_switches|extra_wakeups|^waits|syscw|wakeup_writes|missed|early_fires|"
                   r"instructions|cpu|lag|_per_request|socket_errors|non_2xx)")


def better_of(key):
    """'lower', 'higher' or None (no direction known: the verdict then says only 'changed')."""
    k = key.lower()
    if "cpu" in k or "_ns_per" in k:      # CPU time (per second, per request); ns per timer
        return "lower"
    if HIGHER.search(k):
        return "higher"
    if LOWER.search(k):
        return "lower"
    return None


def stat_label(key):
    k = key
    k = re.sub(r"^ns_per_", "ns/", k)
    k = re.sub(r"_per_s$", "/s", k)
    k = re.sub(r"_ns$", "", k)
    k = re.sub(r"_us$", "", k)
    k = k.replace("p999", "p99.9")
    k = k.replace("oneway", "one-way").replace("pingpong", "ping-pong")
    return k.replace("_", " ")


def part_label(p):
    m = re.fullmatch(r"producers_(\d+)", p)
    if m:
        return f"{m.group(1)} producer" + ("s" if m.group(1) != "1" else "")
    m = re.fullmatch(r"loops_(\d+)", p)
    if m:
        return f"{m.group(1)} loop" + ("s" if m.group(1) != "1" else "")
    return {"oneway": "one-way", "pingpong": "ping-pong"}.get(p, p.replace("_", " "))


# ---- crunloop-bench (latest.json) ------------------------------------------------------------

CONTAINERS = {"peers", "windows", "scenarios"}


def _bench_name(section, parts, stat):
    """NAME of a figure of benchmark `section` at path `parts` (peer removed), key `stat`."""
    sec_label = SECTION_LABEL.get(section)
    qual = []
    if sec_label is None and section.startswith("latency"):
        sec_label = "wakeup"
        extra = section[len("latency"):].strip("_")
        if extra:
            qual.append(extra.replace("_", " "))
    if sec_label is None:
        sec_label = section.replace("_", " ")
    if sec_label == "wakeup":
        mode = None
        rest = []
        for p in parts:
            m = re.fullmatch(r"(oneway|pingpong)(?:_(.+))?", p)
            if m and mode is None:
                mode = part_label(m.group(1))
                if m.group(2):
                    qual.append(m.group(2).replace("_", " "))
            else:
                rest.append(p.replace("_", " "))
        qual = rest + qual
        words = [sec_label] + ([mode] if mode else []) + [stat_label(stat)]
        name = " ".join(words)
        return name + (f" ({', '.join(qual)})" if qual else "")
    return " ".join([sec_label] + [part_label(p) for p in parts] + [stat_label(stat)])


def _walk_bench(d):
    out = []

    def visit(node, path):
        if not isinstance(node, dict):
            return
        for k, v in node.items():
            if k.endswith("_spread") or k == "histogram":
                continue
            if isinstance(v, dict):
                visit(v, path + [k])
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                sp = node.get(k + "_spread")
                if isinstance(sp, dict) and k not in CONFIG_KEYS:
                    out.append((path + [k], v, sp))

    for section, body in d.items():
        if section == "instructions_per_pass" or not isinstance(body, dict):
            continue
        if section in ("machine", "placement", "toolchain", "peers"):
            continue
        visit(body, [section])

    metrics = []
    for path, value, sp in out:
        section, inner, stat = path[0], path[1:-1], path[-1]
        peer = None
        parts = []
        i = 0
        while i < len(inner):
            p = inner[i]
            if p in ("peers", "tolerance") and i + 1 < len(inner) and peer is None:
                peer = inner[i + 1]
                if p == "tolerance":
                    parts.append("tolerance")
                i += 2
                continue
            if p not in CONTAINERS:
                parts.append(p)
            i += 1
        if peer is None and section == "spin":
            peer = "CRunLoop"       # benchmark 13 runs CRunLoop only
        vals = sp.get("values")
        rounds = [float(x) for x in vals if x is not None] if isinstance(vals, list) else None
        metrics.append(Metric(
            path=".".join(path), peer=peer, name=_bench_name(section, parts, stat),
            value=float(value), lo=sp.get("min"), hi=sp.get("max"), rounds=rounds or None,
            unit=unit_of(stat), better=better_of(stat), section=section, parts=parts,
            stat=stat, kind="bench"))
    instr = d.get("instructions_per_pass")
    if isinstance(instr, dict):
        for k, v in instr.items():
            if "/" in k and isinstance(v, (int, float)):
                peer, scen = k.split("/", 1)
                metrics.append(Metric(
                    path=f"instructions_per_pass.{k}", peer=peer,
                    name=f"pass {scen.replace('_', ' ')} instructions", value=float(v), lo=v, hi=v,
                    rounds=None, unit="instr", better="lower", section="instructions_per_pass",
                    parts=[scen], stat="instructions", kind="bench"))
    return metrics


# ---- http.json -------------------------------------------------------------------------------

HTTP_LABEL = {"requests_per_s": "requests/s", "p99_us": "p99",
              "server_cpu_us_per_request": "CPU per request", "socket_errors": "socket errors",
              "non_2xx": "non-2xx"}


def _walk_http(d):
    metrics = []
    for r in d.get("results", []):
        server, conns = r.get("server"), r.get("connections")
        for k, v in r.items():
            if k.endswith("_spread") or k in ("server", "connections"):
                continue
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                continue
            sp = r.get(k + "_spread")
            lo, hi = (sp[0], sp[-1]) if isinstance(sp, list) and sp else (v, v)
            unit = {"p99_us": "us", "server_cpu_us_per_request": "us"}.get(k, unit_of(k))
            metrics.append(Metric(
                path=f"results.{server}.{conns}.{k}", peer=server,
                name=f"http {HTTP_LABEL.get(k, k.replace('_', ' '))} at {conns} connections",
                value=float(v), lo=lo, hi=hi, rounds=None, unit=unit, better=better_of(k),
                section="http", parts=[str(conns)], stat=k, kind="http"))
    for conns, rs in (d.get("ratios") or {}).items():
        for k, v in rs.items():
            if not isinstance(v, (int, float)):
                continue
            better = "lower" if k.startswith("cpu_") else "higher"   # requests/s ratios: higher
            metrics.append(Metric(
                path=f"ratios.{conns}.{k}", peer=None,
                name=f"http {k.replace('_', ' ')} at {conns} connections", value=float(v), lo=v,
                hi=v, rounds=None, unit="ratio", better=better, section="http", parts=[conns],
                stat=k, kind="http"))
    return metrics


# ---- swift-layer.json ------------------------------------------------------------------------

SWIFT_PEER = {"c_api": "C API", "swift_layer": "Swift layer", "control": "control",
              "foundation": "Foundation", "swift_floor": "Swift floor",
              "loop_executor": "LoopExecutor", "default_executor": "default executor",
              "dispatch_queue_executor": "DispatchQueue executor"}


def _walk_swift(d):
    metrics = []
    for fig, body in d.items():
        if not isinstance(body, dict):
            continue
        unit = body.get("unit", "")
        unit = {"ns/op": "ns", "calls/s": "/s"}.get(unit, unit)
        for k, v in body.items():
            if k == "unit" or not isinstance(v, (int, float)) or isinstance(v, bool):
                continue
            label = fig.replace("_", " ")
            if "_over_" in k:
                peer, name, u, better = None, f"swift {label} {k.replace('_', ' ')}", "ratio", "lower"
            else:
                peer, name, u = SWIFT_PEER.get(k, k.replace("_", " ")), f"swift {label}", unit
                better = "higher" if u == "/s" else "lower"
            metrics.append(Metric(
                path=f"{fig}.{k}", peer=peer, name=name, value=float(v), lo=v, hi=v, rounds=None,
                unit=u, better=better, section="swift", parts=[fig], stat=k, kind="swift"))
    return metrics


# ---- files -----------------------------------------------------------------------------------

def kind_of(d):
    if not isinstance(d, dict):
        return None
    if d.get("benchmark") == "crunloop-bench" or "latency" in d or "machine" in d:
        return "bench"
    if d.get("benchmark") == "http_keepalive_idle" or isinstance(d.get("results"), list):
        return "http"
    if any(isinstance(v, dict) and "unit" in v for v in d.values()):
        return "swift"
    return "bench"


def load_json(path):
    with open(path) as f:
        return json.load(f)


def expand(paths):
    """Files named, a directory standing for its latest.json, http.json and swift-layer.json."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            for n in ("latest.json", "http.json", "swift-layer.json"):
                if os.path.exists(os.path.join(p, n)):
                    out.append(os.path.join(p, n))
        else:
            out.append(p)
    return out


class Run:
    """One run: one or more JSON files (the C suite, the HTTP row, the Swift row)."""

    def __init__(self, paths):
        self.paths = expand(paths)
        self.docs = {}          # kind -> parsed JSON
        self.metrics = []
        for p in self.paths:
            d = load_json(p)
            k = kind_of(d)
            self.docs.setdefault(k, d)
            self.metrics += {"bench": _walk_bench, "http": _walk_http, "swift": _walk_swift}[k](d)
        self._index()

    def _index(self):
        self.by_full = {}
        self.by_name = {}       # default-peer name -> metric
        for m in self.metrics:
            self.by_full.setdefault(norm(m.full), m)
            self.by_full.setdefault(norm(m.path), m)
            if m.peer is None or m.peer in DEFAULT_PEERS:
                self.by_name.setdefault(norm(m.name), m)

    def find(self, name):
        n = norm(name)
        return self.by_full.get(n) or self.by_name.get(n)

    @property
    def bench(self):
        return self.docs.get("bench") or {}

    def peers(self):
        """Peer names in the order of the C suite's JSON, then any others met."""
        order = list((self.bench.get("peers") or {}).keys())
        for m in self.metrics:
            if m.peer and m.peer not in order:
                order.append(m.peer)
        return order

    def latency_cdfs(self):
        """{(scenario label, mode): {peer: [(ns, cumulative fraction), ...]}} from the histograms."""
        out = {}
        lat_sections = [(k, v) for k, v in self.bench.items() if k.startswith("latency") and isinstance(v, dict)]

        def visit(node, path, sec):
            if not isinstance(node, dict):
                return
            for k, v in node.items():
                if isinstance(v, dict) and isinstance(v.get("histogram"), list) and v["histogram"]:
                    peer, quals, mode = None, [], k
                    i = 0
                    while i < len(path):
                        if path[i] == "peers" and i + 1 < len(path):
                            peer = path[i + 1]
                            i += 2
                            continue
                        if path[i] not in CONTAINERS:
                            quals.append(path[i])
                        i += 1
                    extra = sec[len("latency"):].strip("_")
                    if extra:
                        quals.insert(0, extra)
                    m = re.fullmatch(r"(oneway|pingpong)(?:_(.+))?", k)
                    if m:
                        mode = m.group(1)
                        if m.group(2):
                            quals.append(m.group(2))
                    hist = sorted((float(b), float(c)) for b, c in v["histogram"])
                    total = sum(c for _, c in hist)
                    if total <= 0:
                        continue
                    pts, seen = [], 0.0
                    for b, c in hist:
                        seen += c
                        pts.append((b, seen / total))
                    scen = " ".join(q.replace("_", " ") for q in quals) or "idle"
                    out.setdefault((scen, mode), {})[peer or "?"] = pts
                elif isinstance(v, dict):
                    visit(v, path + [k], sec)

        for sec, body in lat_sections:
            visit(body, [], sec)
        return out


def fmt_value(v, unit):
    """A figure in a readable unit: ns shown in us when >= 1000, rates with k/M."""
    if v is None:
        return "-"
    if unit == "ns":
        if abs(v) >= 1e6:
            return f"{v / 1e6:.3g} ms"
        if abs(v) >= 1000:
            return f"{v / 1e3:.3g} us"
        return f"{v:.3g} ns"
    if unit == "/s":
        for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(v) >= div:
                return f"{v / div:.3g}{suf}/s"
        return f"{v:.3g}/s"
    if unit == "s":
        if abs(v) < 1e-3 and v != 0:
            return f"{v * 1e6:.3g} us"
        if abs(v) < 1 and v != 0:
            return f"{v * 1e3:.3g} ms"
        return f"{v:.3g} s"
    if unit == "us":
        return f"{v:.3g} us"
    if unit == "ratio":
        return f"{v:.3g}"
    if unit in ("", "instr"):
        s = f"{v:,.0f}" if abs(v) >= 1e4 else f"{v:.4g}"
        return s + (" instr" if unit else "")
    return f"{v:.4g} {unit}"
