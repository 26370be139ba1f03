"""HTML reports of one run (benchmarks/report) or two (benchmarks/compare -o): one self-contained
file, inline SVG, no script, no network.

Every chart is an <svg class="chart" data-kind="cdf|bar" data-title="...">; its plotted series
are elements with class "series" and data-peer (CDF: a <polyline> whose points are the curve;
bars: a <g> holding one <rect class="bar"> per category); its legend entries are <text
class="legend">PEER</text> (the report test reads these).
"""

import html
import math

import benchmetrics as bm

PALETTE = ["#000000", "#7f7f7f", "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd",
           "#8c564b", "#e377c2", "#17becf"]

CSS = """
body { font-family: sans-serif; font-size: 14px; margin: 16px 24px; color: #222; background: #fff; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; border-bottom: 1px solid #ccc; }
h3 { font-size: 15px; margin: 16px 0 4px; }
table { border-collapse: collapse; margin: 6px 0; }
td, th { border: 1px solid #ddd; padding: 2px 7px; text-align: right; white-space: nowrap; }
th { background: #f3f3f3; } td.k, th.k { text-align: left; }
.spread { color: #777; font-size: 11px; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
.faster, .better { background: #d9f2d9; } .slower, .worse { background: #f8d4d4; }
.higher, .lower { background: #fff2cc; } .nor { color: #888; }
code { background: #f4f4f4; padding: 1px 4px; }
"""


def esc(s):
    return html.escape(str(s), quote=True)


# The colours of plot.c's SVGs, by peer, whichever peers a run has; others take the rest in turn.
KNOWN = ["epoll", "futex", "CRunLoop", "CFRunLoop", "libuv", "GLib", "libev", "libevent"]


def peer_colours(peers):
    out = {p: PALETTE[KNOWN.index(p)] for p in peers if p in KNOWN}
    spare = [c for c in PALETTE if c not in out.values()] + PALETTE[len(KNOWN):]
    for p in peers:
        if p not in out:
            out[p] = spare[len([q for q in out if q not in KNOWN]) % len(spare)]
    return out


# ---- charts ----------------------------------------------------------------------------------

def svg_cdf(title, series, width=600, height=380):
    """series: [(peer, legend label, colour, dashed, [(ns, fraction), ...])]."""
    L, R, T, B = 55, 170, 30, 45
    xs = [x for *_, pts in series for x, _ in pts if x > 0]
    out = [f'<svg class="chart" data-kind="cdf" data-title="{esc(title)}" '
           f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{L}" y="18" font-size="13" font-weight="bold">{esc(title)}</text>']
    if not xs:
        out.append(f'<text x="{L}" y="{T + 40}">no data</text></svg>')
        return "\n".join(out)
    lo = 10 ** math.floor(math.log10(max(min(xs) / 1e3, 0.1)))
    hi = 10 ** math.ceil(math.log10(max(xs) / 1e3))
    if hi <= lo:
        hi = lo * 10

    def X(us):
        us = min(max(us, lo), hi)
        return L + (math.log10(us) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * (width - L - R)

    def Y(q):
        return T + (1 - q) * (height - T - B)

    d = lo
    while d <= hi * 1.0001:
        out.append(f'<line x1="{X(d):.1f}" y1="{T}" x2="{X(d):.1f}" y2="{height - B}" stroke="#ddd"/>')
        out.append(f'<text x="{X(d):.1f}" y="{height - B + 14}" text-anchor="middle">{d:g}</text>')
        d *= 10
    for q in range(0, 11, 2):
        y = Y(q / 10)
        out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{width - R}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{L - 5}" y="{y + 4:.1f}" text-anchor="end">{q / 10:.1f}</text>')
    out.append(f'<text x="{(L + width - R) / 2:.0f}" y="{height - 10}" text-anchor="middle">'
               f'latency (us, log scale)</text>')
    out.append(f'<text x="14" y="{(T + height - B) / 2:.0f}" transform="rotate(-90 14 '
               f'{(T + height - B) / 2:.0f})" text-anchor="middle">fraction of samples</text>')
    for k, (peer, label, col, dashed, pts) in enumerate(series):
        dash = ' stroke-dasharray="5,3"' if dashed else ""
        p = " ".join(f"{X(x / 1e3):.1f},{Y(f):.1f}" for x, f in pts)
        out.append(f'<polyline class="series" data-peer="{esc(peer)}" fill="none" stroke="{col}" '
                   f'stroke-width="1.6"{dash} points="{p}"/>')
        y = T + 8 + 16 * k
        med = next((x for x, f in pts if f >= 0.5), pts[-1][0])
        out.append(f'<line x1="{width - R + 8}" y1="{y}" x2="{width - R + 28}" y2="{y}" '
                   f'stroke="{col}" stroke-width="3"{dash}/>')
        out.append(f'<text class="legend" x="{width - R + 33}" y="{y + 4}">{esc(label)}</text>'
                   f'<text x="{width - 8}" y="{y + 4}" text-anchor="end" fill="#666">'
                   f'{med / 1e3:.3g}</text>')
    out.append(f'<text x="{width - 8}" y="{T - 6}" text-anchor="end" fill="#666">p50 us</text>')
    out.append("</svg>")
    return "\n".join(out)


def svg_bars(title, categories, series, unit, better, width=600):
    """Horizontal grouped bars. series: [(peer, legend label, colour, opacity,
    {category: (median, lo, hi)})]; whiskers from lo to hi (worst to best round)."""
    L, R, T = 150, 80, 44
    bar_h, gap = 11, 10
    n = max(1, len(series))
    block = n * bar_h + gap
    legend_rows = (len(series) + 3) // 4
    height = T + legend_rows * 15 + len(categories) * block + 30
    top = T + legend_rows * 15
    vals = [v for *_, d in series for c in categories if c in d for v in d[c] if v is not None]
    pos = [v for v in vals if v > 0]
    hi = max(pos) if pos else 1.0
    lo_pos = min(pos) if pos else 1.0
    log = hi / lo_pos > 100
    if log:
        a, b = 10 ** math.floor(math.log10(lo_pos)), 10 ** math.ceil(math.log10(hi))
        if b <= a:
            b = a * 10

        def X(v):
            if v <= 0:
                return L
            return L + (math.log10(min(max(v, a), b)) - math.log10(a)) / (math.log10(b) - math.log10(a)) * (width - L - R)
    else:
        a, b = 0.0, hi * 1.05

        def X(v):
            return L + max(0.0, v) / b * (width - L - R)
    sense = {"lower": "lower is better", "higher": "higher is better"}.get(better, "")
    out = [f'<svg class="chart" data-kind="bar" data-title="{esc(title)}" '
           f'xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="8" y="18" font-size="13" font-weight="bold">{esc(title)}</text>',
           f'<text x="8" y="34" fill="#666">{esc(unit_label(unit))}{", log scale" if log else ""}'
           f'{"; " + sense if sense else ""}; whiskers: worst-best round</text>']
    for k, (peer, label, col, op, _) in enumerate(series):
        x = 8 + (k % 4) * ((width - 16) / 4)
        y = T + (k // 4) * 15
        out.append(f'<rect x="{x:.0f}" y="{y}" width="14" height="9" fill="{col}" fill-opacity="{op}"/>'
                   f'<text class="legend" x="{x + 18:.0f}" y="{y + 9}">{esc(label)}</text>')
    # axis ticks
    ticks = []
    if log:
        t = a
        while t <= b * 1.0001:
            ticks.append(t)
            t *= 10
    else:
        step = nice_step(b / 5)
        t = 0.0
        while t <= b:
            ticks.append(t)
            t += step
    axis_y = top + len(categories) * block
    for t in ticks:
        out.append(f'<line x1="{X(t):.1f}" y1="{top}" x2="{X(t):.1f}" y2="{axis_y}" stroke="#eee"/>'
                   f'<text x="{X(t):.1f}" y="{axis_y + 13}" text-anchor="middle" fill="#666">'
                   f'{esc(short(t, unit))}</text>')
    for ci, c in enumerate(categories):
        y0 = top + ci * block
        out.append(f'<text x="{L - 6}" y="{y0 + n * bar_h / 2 + 4:.1f}" text-anchor="end">{esc(c)}</text>')
    for k, (peer, label, col, op, d) in enumerate(series):
        out.append(f'<g class="series" data-peer="{esc(peer)}">')
        for ci, c in enumerate(categories):
            if c not in d or d[c][0] is None:
                continue
            med, lo, hi_ = d[c]
            y = top + ci * block + k * bar_h
            w = max(X(med) - L, 0.5)
            out.append(f'<rect class="bar" x="{L}" y="{y}" width="{w:.1f}" height="{bar_h - 2}" '
                       f'fill="{col}" fill-opacity="{op}"><title>{esc(label)}: '
                       f'{esc(bm.fmt_value(med, unit))}</title></rect>')
            if lo is not None and hi_ is not None and hi_ > lo:
                ym = y + (bar_h - 2) / 2
                out.append(f'<line x1="{X(lo):.1f}" y1="{ym:.1f}" x2="{X(hi_):.1f}" y2="{ym:.1f}" '
                           f'stroke="#333" stroke-width="1"/>')
            out.append(f'<text x="{X(max(med, hi_ or med)) + 4:.1f}" y="{y + bar_h - 3}" '
                       f'font-size="9" fill="#444">{esc(bm.fmt_value(med, unit))}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


def nice_step(x):
    if x <= 0:
        return 1.0
    e = 10 ** math.floor(math.log10(x))
    for m in (1, 2, 5, 10):
        if m * e >= x:
            return m * e
    return 10 * e


def short(v, unit):
    if v == 0:
        return "0"
    if unit in ("ns", "s", "us"):
        return bm.fmt_value(v, unit)
    if unit == "/s":
        for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
            if v >= div:
                return f"{v / div:g}{suf}"
    return f"{v:g}"


def unit_label(unit):
    return {"ns": "ns", "us": "us", "s": "seconds", "/s": "per second", "B": "bytes",
            "ratio": "ratio", "instr": "instructions", "ns/s": "ns per second"}.get(unit, unit or "count")


# ---- which figures are drawn as bars ---------------------------------------------------------

def bar_groups(metrics):
    """[(title, unit, better, [categories], {peer: {category: metric}})] for the timer, fd,
    pass, memory, fire-rate, cross-thread and HTTP figures."""
    groups = {}
    order = []

    def put(key, title, cat, m):
        if key not in groups:
            groups[key] = (title, m.unit, m.better, [], {})
            order.append(key)
        g = groups[key]
        if cat not in g[3]:
            g[3].append(cat)
        g[4].setdefault(m.peer or "-", {})[cat] = m

    for m in metrics:
        s, st = m.section, m.stat
        if s == "timer_heap" and st == "ns_per_op":
            put(("th", m.parts[0]), f"timer heap, {m.parts[0]} timers: ns per operation", m.parts[1], m)
        elif s == "timer_precision" and st.startswith("lateness"):
            put(("tp",), "timer precision (1 ms repeating timer): lateness", bm.stat_label(st), m)
        elif s == "memory_per_timer" and st.startswith("bytes_per_timer"):
            put(("mem",), "memory per timer",
                "net of adapter item" if "net" in st else "bytes per timer", m)
        elif s == "fire_rate" and st == "fires_per_s":
            put(("fr",), "random-order fire rate", "fires/s", m)
        elif s == "cross_thread_timers" and st.endswith("_ns"):
            put(("xt",), "cross-thread timer add/remove: ns per operation", bm.stat_label(st), m)
        elif s == "many_fds" and st == "rounds_per_s":
            put(("fd",), "many fds (1% of the pairs active): write/read rounds per second", "rounds/s", m)
        elif s == "pass" and st == "ns_per_pass":
            put(("pass",), "per-pass cost: ns per non-blocking pass",
                " ".join(bm.part_label(x) for x in m.parts), m)
        elif s == "http" and st in ("requests_per_s", "server_cpu_us_per_request"):
            t = "HTTP keep-alive: requests per second" if st == "requests_per_s" else \
                "HTTP keep-alive: server CPU per request"
            put(("http", st), t, f"{m.parts[0]} connections", m)
    return [groups[k] for k in order]


# ---- pages -----------------------------------------------------------------------------------

def page(title, body):
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><style>{CSS}</style></head>\n<body>\n{body}\n</body></html>\n")


def machine_rows(run):
    b = run.bench
    rows = []
    for sec in ("machine", "placement", "toolchain"):
        for k, v in (b.get(sec) or {}).items():
            rows.append((f"{sec}.{k}", v))
    for k in ("crunloop_version", "date", "quick", "rounds", "heavy_rounds"):
        if k in b:
            rows.append((k, b[k]))
    h = run.docs.get("http")
    if h:
        for k in ("tool", "rounds", "duration_s", "placement", "idle_timeout_s"):
            if k in h:
                rows.append((f"http.{k}", h[k]))
    s = run.docs.get("swift")
    if s:
        for k in ("quick", "rounds"):
            if k in s:
                rows.append((f"swift-layer.{k}", s[k]))
    return rows


def peer_rows(run):
    out = []
    for name, p in (run.bench.get("peers") or {}).items():
        state = "yes" if p.get("available") else f"no: {p.get('why', '')}"
        out.append((name, p.get("version") or "-", state, "floor" if p.get("floor") else ""))
    return out


def cell(m):
    if m is None:
        return "<td></td>"
    sp = ""
    if (m.lo is not None and m.hi is not None and
            bm.fmt_value(m.lo, m.unit) != bm.fmt_value(m.hi, m.unit)):
        sp = (f'<br><span class="spread">[{esc(bm.fmt_value(m.lo, m.unit))}&ndash;'
              f'{esc(bm.fmt_value(m.hi, m.unit))}]</span>')
    return f"<td>{esc(bm.fmt_value(m.value, m.unit))}{sp}</td>"


def figures_tables(run):
    """One table per section: a row per metric name, a column per peer, median [min-max]."""
    parts = []
    sections = []
    for m in run.metrics:
        if m.section not in sections:
            sections.append(m.section)
    for sec in sections:
        ms = [m for m in run.metrics if m.section == sec]
        peers = []
        for m in ms:
            if (m.peer or "-") not in peers:
                peers.append(m.peer or "-")
        names = []
        grid = {}
        for m in ms:
            if m.name not in names:
                names.append(m.name)
            grid[(m.name, m.peer or "-")] = m
        parts.append(f"<h3>{esc(sec)}</h3><table><tr><th class=k>metric</th>"
                     + "".join(f"<th>{esc(p)}</th>" for p in peers) + "</tr>")
        for n in names:
            parts.append(f"<tr><td class=k>{esc(n)}</td>"
                         + "".join(cell(grid.get((n, p))) for p in peers) + "</tr>")
        parts.append("</table>")
    return "\n".join(parts)


def cdf_title(scen, mode):
    what = {"oneway": "one-way wakeup", "pingpong": "ping-pong round trip"}.get(mode, mode)
    return f"{what} latency, {scen} scenario: CDF"


def write_report(path, run, command=None):
    peers = run.peers()
    col = peer_colours(peers)
    b = run.bench
    title = "CRunLoop benchmarks" + (f", {b['date']}" if b.get("date") else "")
    body = [f"<h1>{esc(title)}</h1>"]
    if command:
        body.append(f"<p>command: <code>{esc(command)}</code></p>")
    body.append(f"<p>files: {esc(', '.join(run.paths))}. Figures are medians over the rounds, "
                f"[worst&ndash;best round] beside them (benchmarks/README.md).</p>")
    body.append("<h2>Machine and placement</h2><table>")
    body += [f"<tr><td class=k>{esc(k)}</td><td class=k>{esc(v)}</td></tr>" for k, v in machine_rows(run)]
    body.append("</table><table><tr><th class=k>peer</th><th class=k>version</th>"
                "<th class=k>available</th><th class=k></th></tr>")
    body += [f"<tr><td class=k>{esc(a)}</td><td class=k>{esc(v)}</td><td class=k>{esc(s)}</td>"
             f"<td class=k>{esc(f)}</td></tr>" for a, v, s, f in peer_rows(run)]
    body.append("</table>")

    cdfs = run.latency_cdfs()
    if cdfs:
        body.append("<h2>Wakeup latency: CDFs (all rounds pooled)</h2><div class=charts>")
        for (scen, mode), per_peer in cdfs.items():
            series = [(p, p, col.get(p, "#000"), False, pts) for p, pts in
                      sorted(per_peer.items(), key=lambda kv: peers.index(kv[0]) if kv[0] in peers else 99)]
            body.append(svg_cdf(cdf_title(scen, mode), series))
        body.append("</div>")

    groups = bar_groups(run.metrics)
    if groups:
        body.append("<h2>Timers, fds, passes (and HTTP)</h2><div class=charts>")
        for title, unit, better, cats, per_peer in groups:
            series = []
            for p in sorted(per_peer, key=lambda p: peers.index(p) if p in peers else 99):
                d = {c: (m.value, m.lo, m.hi) for c, m in per_peer[p].items()}
                series.append((p, p, col.get(p, "#000"), 1.0, d))
            body.append(svg_bars(title, cats, series, unit, better))
        body.append("</div>")
    body.append("<h2>All figures</h2>")
    body.append(figures_tables(run))
    with open(path, "w") as f:
        f.write(page(title, "\n".join(body)))


def write_compare(path, run_a, run_b, rows, alpha, min_effect, command=None):
    peers = run_a.peers() + [p for p in run_b.peers() if p not in run_a.peers()]
    col = peer_colours(peers)
    title = "CRunLoop benchmarks: A vs B"
    body = [f"<h1>{esc(title)}</h1>"]
    if command:
        body.append(f"<p>command: <code>{esc(command)}</code></p>")
    body.append(f"<p>A: {esc(', '.join(run_a.paths))} &mdash; B: {esc(', '.join(run_b.paths))}. "
                f"Verdict: two-sided Mann-Whitney U test over the rounds, a change when p &lt; "
                f"{alpha:g} and the medians are {min_effect:g}% apart or more. In the charts A is "
                f"dashed or pale, B solid.</p>")
    body.append("<h2>Machine and placement</h2><table><tr><th class=k></th><th class=k>A</th>"
                "<th class=k>B</th></tr>")
    ra, rb = dict(machine_rows(run_a)), dict(machine_rows(run_b))
    for k in list(ra) + [k for k in rb if k not in ra]:
        va, vb = ra.get(k, "-"), rb.get(k, "-")
        mark = "" if va == vb else ' class="higher"'
        body.append(f"<tr{mark}><td class=k>{esc(k)}</td><td class=k>{esc(va)}</td>"
                    f"<td class=k>{esc(vb)}</td></tr>")
    pa = {a: v for a, v, *_ in peer_rows(run_a)}
    pb = {a: v for a, v, *_ in peer_rows(run_b)}
    for p in peers:
        if p in pa or p in pb:
            mark = "" if pa.get(p) == pb.get(p) else ' class="higher"'
            body.append(f"<tr{mark}><td class=k>peer {esc(p)}</td><td class=k>{esc(pa.get(p, '-'))}</td>"
                        f"<td class=k>{esc(pb.get(p, '-'))}</td></tr>")
    body.append("</table>")

    ca, cb = run_a.latency_cdfs(), run_b.latency_cdfs()
    keys = [k for k in ca if k in cb]
    if keys:
        body.append("<h2>Wakeup latency: CDFs, A dashed, B solid</h2><div class=charts>")
        for key in keys:
            series = []
            for p in peers:
                if p in ca[key]:
                    series.append((p, f"{p} A", col[p], True, ca[key][p]))
                if p in cb[key]:
                    series.append((p, f"{p} B", col[p], False, cb[key][p]))
            body.append(svg_cdf(cdf_title(*key) + " (A vs B)", series, height=max(380, 60 + 16 * len(series))))
        body.append("</div>")

    ga = bar_groups([r.a for r in rows])
    gb = {g[0]: g for g in bar_groups([r.b for r in rows])}
    if ga:
        body.append("<h2>Timers, fds, passes (and HTTP): A pale, B solid</h2><div class=charts>")
        for title, unit, better, cats, per_peer in ga:
            other = gb.get(title, (None, None, None, [], {}))[4]
            series = []
            for p in sorted(per_peer, key=lambda p: peers.index(p) if p in peers else 99):
                series.append((p, f"{p} A", col.get(p, "#000"), 0.4,
                               {c: (m.value, m.lo, m.hi) for c, m in per_peer[p].items()}))
                if p in other:
                    series.append((p, f"{p} B", col.get(p, "#000"), 1.0,
                                   {c: (m.value, m.lo, m.hi) for c, m in other[p].items()}))
            body.append(svg_bars(title, cats, series, unit, better))
        body.append("</div>")

    body.append("<h2>Every metric of both runs</h2><table><tr><th class=k>metric</th><th>A</th>"
                "<th>B</th><th>B/A</th><th>p</th><th class=k>verdict</th></tr>")
    for r in rows:
        ratio = f"{r.ratio:.3f}" if math.isfinite(r.ratio) else "-"
        p = "-" if r.p is None else (f"{r.p:.4f}" if r.p >= 1e-4 else f"{r.p:.1e}")
        cls = r.verdict.split()[0] if r.verdict in ("faster", "slower", "better", "worse",
                                                     "higher", "lower") else "nor"
        body.append(f"<tr><td class=k>{esc(r.a.full)}</td>{cell(r.a)}{cell(r.b)}<td>{ratio}</td>"
                    f"<td>{p}</td><td class=\"k {cls}\">{esc(r.verdict)}</td></tr>")
    body.append("</table>")
    with open(path, "w") as f:
        f.write(page(title, "\n".join(body)))
