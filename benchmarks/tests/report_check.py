#!/usr/bin/env python3
"""report_check.py - the HTML reports render (make bench-report-check; standard library only).

usage: report_check.py REPORT.html FIXTURE.json [--compare] [--chromium PATH] [--keep DIR]

Checks, each of which fails the test:
  1. the file is self-contained: no <script>, no src= or href= attribute, no url(...), no
     http(s) address other than the SVG namespace;
  2. the charts: at least 2 CDF charts (one-way, ping-pong) and, outside --compare, at least 3
     bar charts; every chart has at least one series; every CDF series is a polyline of at
     least 2 points inside the chart, and every bar chart at least 2 bars of positive width;
  3. legends: there is a CDF chart for every scenario and mode with histograms in FIXTURE.json,
     and its legend names every peer that has a histogram there in FIXTURE.json (read here straight from the JSON, not through the report's code), with " A"
     and " B" entries for --compare; every bar chart's legend names each of its series;
  4. rendering, in headless Chromium (at half scale): (a) a screenshot of the report's first 1280x2000 pixels
     has enough non-white pixels, and coloured ones (the series, not only black text); (b) a
     page made of the report's charts alone, each in a fixed 620x440 cell, is screenshot and
     every cell must hold coloured pixels (the plotted series) and non-white ones: no chart
     renders blank. The PNGs are decoded here (zlib + PNG filters).
"""

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from html.parser import HTMLParser

CELL_W, CELL_H, COLS = 620, 440, 2
SCALE = 0.5     # screenshots at half scale: a quarter of the pixels to decode


# ---- PNG ------------------------------------------------------------------------------------

def decode_png(path):
    """(width, height, rows): rows of bytes, 3 or 4 bytes a pixel (8-bit RGB or RGBA)."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, w = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            if depth != 8 or ctype not in (2, 6) or interlace:
                raise ValueError(f"{path}: PNG depth {depth} colour type {ctype} not handled")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat.append(chunk)
        elif kind == b"IEND":
            break
    raw = zlib.decompress(b"".join(idat))
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif f == 2:
            for i in range(stride):
                line[i] = (line[i] + prev[i]) & 255
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        elif f != 0:
            raise ValueError(f"{path}: bad filter {f}")
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def count_pixels(rows, bpp, x0, y0, x1, y1):
    """(non-white, coloured) pixels in the box: non-white = any channel < 235; coloured =
    channels more than 60 apart (a series' colour, not black, grey or white)."""
    nonwhite = coloured = 0
    for y in range(y0, y1):
        r = rows[y]
        for x in range(x0, x1):
            i = x * bpp
            c = r[i:i + 3]
            lo, hi = min(c), max(c)
            if lo < 235:
                nonwhite += 1
            if hi - lo > 60:
                coloured += 1
    return nonwhite, coloured


def screenshot(chromium, html_path, png, w, h):
    """A PNG of w x h CSS pixels, SCALE device pixels per CSS pixel."""
    cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           f"--force-device-scale-factor={SCALE}", f"--window-size={w},{h}", f"--screenshot={png}",
           "file://" + os.path.abspath(html_path)]
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
                   check=False)
    if not os.path.exists(png):
        raise RuntimeError(f"chromium wrote no screenshot ({' '.join(cmd)})")


# ---- HTML -----------------------------------------------------------------------------------

class Charts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.charts = []       # {kind, title, series: [(peer, npoints)], bars, legend: []}
        self.cur = None
        self.in_legend = False
        self.bad = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for k in ("src", "href"):
            if k in a:
                self.bad.append(f"<{tag} {k}=...>")
        if tag == "script":
            self.bad.append("<script>")
        cls = (a.get("class") or "").split()
        if tag == "svg" and "chart" in cls:
            self.cur = {"kind": a.get("data-kind"), "title": a.get("data-title"), "series": [],
                        "bars": 0, "legend": [], "width": float(a.get("width", 0)),
                        "height": float(a.get("height", 0))}
            self.charts.append(self.cur)
        elif self.cur is not None:
            if tag == "polyline" and "series" in cls:
                pts = [p.split(",") for p in a.get("points", "").split()]
                inside = all(0 <= float(x) <= self.cur["width"] and 0 <= float(y) <= self.cur["height"]
                             for x, y in pts)
                self.cur["series"].append((a.get("data-peer"), len(pts) if inside else -1))
            elif tag == "g" and "series" in cls:
                self.cur["series"].append((a.get("data-peer"), None))
            elif tag == "rect" and "bar" in cls and float(a.get("width", 0)) > 0:
                self.cur["bars"] += 1
            elif tag == "text" and "legend" in cls:
                self.in_legend = True
                self.cur["legend"].append("")

    def handle_endtag(self, tag):
        if tag == "svg":
            self.cur = None
        if tag == "text":
            self.in_legend = False

    def handle_data(self, data):
        if self.in_legend and self.cur is not None:
            self.cur["legend"][-1] += data


def peers_with_histograms(fixture):
    """{(scenario, mode): set(peers)} read straight from the JSON: latency.peers.P.MODE.histogram
    (scenario "idle") and latency.scenarios.S.peers.P.MODE.histogram."""
    d = json.load(open(fixture))
    lat = d.get("latency") or {}
    out = {}
    places = [("idle", lat.get("peers") or {})]
    for scen, body in (lat.get("scenarios") or {}).items():
        if isinstance(body, dict) and isinstance(body.get("peers"), dict):
            places.append((scen, body["peers"]))
    for scen, peers in places:
        for peer, body in peers.items():
            for mode in ("oneway", "pingpong"):
                if isinstance(body, dict) and (body.get(mode) or {}).get("histogram"):
                    out.setdefault((scen, mode), set()).add(peer)
    return out


def main(argv):
    report, fixture = argv[0], argv[1]
    compare = "--compare" in argv
    chromium = argv[argv.index("--chromium") + 1] if "--chromium" in argv else \
        shutil.which("chromium") or shutil.which("chromium-browser")
    keep = argv[argv.index("--keep") + 1] if "--keep" in argv else None
    errors = []
    text = open(report).read()

    # 1. self-contained
    p = Charts()
    p.feed(text)
    errors += [f"not self-contained: {b}" for b in p.bad]
    for addr in re.findall(r"https?://[^\s\"'<>)]+", text):
        if addr != "http://www.w3.org/2000/svg":
            errors.append(f"not self-contained: address {addr}")
    if re.search(r"url\(", text):
        errors.append("not self-contained: url(...)")

    # 2. charts
    cdfs = [c for c in p.charts if c["kind"] == "cdf"]
    bars = [c for c in p.charts if c["kind"] == "bar"]
    if len(cdfs) < 2:
        errors.append(f"{len(cdfs)} CDF charts, expected at least 2")
    if not compare and len(bars) < 3:
        errors.append(f"{len(bars)} bar charts, expected at least 3")
    for c in p.charts:
        if not c["series"]:
            errors.append(f"chart '{c['title']}': no series")
        if c["kind"] == "cdf":
            if not any(n >= 2 for _, n in c["series"]):
                errors.append(f"chart '{c['title']}': no series of 2 points or more")
            for peer, n in c["series"]:
                if n is not None and n < 2:
                    errors.append(f"chart '{c['title']}': series {peer} has {n} points (or lies outside)")
        elif c["bars"] < 2:
            errors.append(f"chart '{c['title']}': {c['bars']} bars")

    # 3. legends
    expected = peers_with_histograms(fixture)
    charted = set()
    for c in cdfs:
        mode = "oneway" if c["title"].startswith("one-way") else "pingpong"
        m = re.search(r", (.+?) scenario", c["title"])
        key = (m.group(1) if m else "idle", mode)
        charted.add(key)
        legend = {s.strip() for s in c["legend"]}
        for peer in sorted(expected.get(key, ())):
            want = [f"{peer} A", f"{peer} B"] if compare else [peer]
            for w in want:
                if w not in legend:
                    errors.append(f"chart '{c['title']}': legend lacks {w} (has {sorted(legend)})")
    if not expected:
        errors.append(f"{fixture}: no latency histogram (wrong fixture?)")
    for key in sorted(set(expected) - charted):
        errors.append(f"no CDF chart for scenario {key[0]}, {key[1]}")
    for c in bars:
        legend = {s.strip() for s in c["legend"]}
        for peer, _ in c["series"]:
            if not any(l.split(" ")[0] == peer or l == peer for l in legend):
                errors.append(f"chart '{c['title']}': legend lacks {peer}")

    # 4. rendering
    if not chromium:
        errors.append("chromium not found (Debian package chromium)")
    else:
        tmp = keep or tempfile.mkdtemp()
        try:
            shot = os.path.join(tmp, "report.png")
            screenshot(chromium, report, shot, 1280, 2000)
            w, h, bpp, rows = decode_png(shot)
            nonwhite, coloured = count_pixels(rows, bpp, 0, 0, w, h)
            print(f"report_check: screenshot {w}x{h}: {nonwhite} non-white pixels, {coloured} coloured")
            if nonwhite < 0.02 * w * h or coloured < 500:
                errors.append(f"screenshot nearly blank: {nonwhite} non-white, {coloured} coloured pixels")
            # every chart alone in a cell of a grid page
            svgs = re.findall(r'<svg class="chart".*?</svg>', text, re.S)
            cells = []
            for i, s in enumerate(svgs):
                x, y = (i % COLS) * CELL_W, (i // COLS) * CELL_H
                cells.append(f'<div style="position:absolute;left:{x}px;top:{y}px;width:{CELL_W}px;'
                             f'height:{CELL_H}px;overflow:hidden">{s}</div>')
            grid = os.path.join(tmp, "charts.html")
            with open(grid, "w") as f:
                f.write('<!DOCTYPE html><html><head><meta charset="utf-8"><style>body{margin:0;'
                        'background:#fff}</style></head><body>' + "".join(cells) + "</body></html>")
            gw, gh = COLS * CELL_W, ((len(svgs) + COLS - 1) // COLS) * CELL_H
            gshot = os.path.join(tmp, "charts.png")
            screenshot(chromium, grid, gshot, gw, gh)
            w, h, bpp, rows = decode_png(gshot)
            if (w, h) != (int(gw * SCALE), int(gh * SCALE)):
                errors.append(f"chart grid screenshot is {w}x{h}, expected {gw}x{gh} x {SCALE}")
            for i, c in enumerate(p.charts):
                x, y = int((i % COLS) * CELL_W * SCALE), int((i // COLS) * CELL_H * SCALE)
                cw, ch = int(CELL_W * SCALE), int(CELL_H * SCALE)
                # below the title: the plotted area, axes and legend
                nw, col = count_pixels(rows, bpp, x, y + int(30 * SCALE), min(x + cw, w), min(y + ch, h))
                if nw < 500 or col < 75:
                    errors.append(f"chart '{c['title']}' renders nearly blank: {nw} non-white, "
                                  f"{col} coloured pixels")
            print(f"report_check: {len(p.charts)} charts rendered one by one in {gw}x{gh}")
        finally:
            if not keep:
                shutil.rmtree(tmp, ignore_errors=True)

    kind = "compare" if compare else "report"
    for e in errors:
        print(f"report_check: FAIL ({kind} {report}): {e}")
    if errors:
        return 1
    print(f"report_check: ok: {report}: {len(cdfs)} CDF charts, {len(bars)} bar charts, legends "
          f"complete, self-contained, renders")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) > 1 else 2)
    sys.exit(main(sys.argv[1:]))
