#!/usr/bin/env bash
# benchmarks/tests/report-check.sh - the HTML reports render (make bench-report-check).
# Writes report.html from the committed fixtures (a real --quick run of the C suite, the HTTP and
# Swift rows) and compare.html of the 6-round latency fixture against a copy made 30% worse, and
# checks both with report_check.py: self-contained, every chart has a series of 2+ points, every
# peer in the legends, and headless Chromium's screenshots are not blank, chart by chart.
# Needs chromium (Debian package chromium; .ci/run installs it). About 15 s.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
fix=benchmarks/results/fixtures
out=${REPORT_CHECK_DIR:-$(mktemp -d)}
[ -n "${REPORT_CHECK_DIR:-}" ] || trap 'rm -rf "$out"' EXIT
mkdir -p "$out"
benchmarks/report "$fix/quick.json" "$fix/http.json" "$fix/swift-layer.json" -o "$out/report.html" \
    --command "benchmarks/run --quick" >/dev/null
python3 benchmarks/tests/make-worse.py "$fix/latency-6rounds.json" "$out/worse.json" 30 >/dev/null
benchmarks/compare "$fix/latency-6rounds.json" "$out/worse.json" -o "$out/compare.html" >/dev/null
status=0
python3 benchmarks/tests/report_check.py "$out/report.html" "$fix/quick.json" || status=1
python3 benchmarks/tests/report_check.py "$out/compare.html" "$fix/latency-6rounds.json" --compare || status=1
# Negative controls: the checker must reject a report whose curves lost their points and whose
# legend lost a peer, and one whose charts are there but do not show (hidden by CSS).
sed -e 's/\(<polyline class="series"[^>]*\)points="[^"]*"/\1points=""/g' \
    -e 's/>libuv</>no-such-peer</g' "$out/report.html" > "$out/broken.html"
if python3 benchmarks/tests/report_check.py "$out/broken.html" "$fix/quick.json" > "$out/broken.log"; then
    echo "report-check: FAIL: a report with empty curves and a missing legend entry passed"; status=1
elif ! grep -q 'legend lacks libuv' "$out/broken.log" || ! grep -q 'no series of 2 points' "$out/broken.log"; then
    echo "report-check: FAIL: the broken report failed for other reasons:"; cat "$out/broken.log"; status=1
else echo "report-check: ok: a report with empty curves and a missing legend entry is rejected"; fi
sed 's|<style>|<style>svg.chart * { visibility: hidden; }|' "$out/report.html" > "$out/hidden.html"
if python3 benchmarks/tests/report_check.py "$out/hidden.html" "$fix/quick.json" > "$out/hidden.log"; then
    echo "report-check: FAIL: a report whose charts do not show passed"; status=1
elif ! grep -q 'nearly blank' "$out/hidden.log"; then
    echo "report-check: FAIL: the hidden-chart report failed for other reasons:"; cat "$out/hidden.log"; status=1
else echo "report-check: ok: a report whose charts render blank is rejected"; fi
[ $status = 0 ] && echo "report-check: all passed" || echo "report-check: FAILED"
exit $status
