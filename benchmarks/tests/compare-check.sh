#!/usr/bin/env bash
# benchmarks/tests/compare-check.sh - benchmarks/compare end to end (make bench-compare-check).
#
#  (i)   a run compared with itself: no metric differs, --fail-on passes, and the figures
#        without rounds say so; an unknown --fail-on name exits 2.
#  (ii)  two real short runs of the latency benchmark, CRunLoop with a 50 us spin window
#        (BENCH_CRUNLOOP_SPIN_US=50) against none (0): the spin's one-way p50 must be "faster",
#        the other way round "slower" and a --fail-on gate on it must fail. The benchmark
#        program's timer slack is set to 1 us for both (prctl before exec: the sample gap is a
#        20 us sleep, which the default 50 us slack would stretch past the 50 us window). 8
#        rounds each, about 2 s of measuring; skipped on a machine with fewer than 2 CPUs.
#  (iii) a 6-round latency fixture against a copy with every one-way figure 30% worse
#        (make-worse.py): --fail-on 'wakeup one-way p99' must exit 1, with a 40% slack 0.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
compare=benchmarks/compare
fix=benchmarks/results/fixtures
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "compare-check: FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "compare-check: ok: $*"; }

# verdict NAME TSVFILE: the verdict column of metric NAME
verdict() { awk -F'\t' -v n="$1" '$1 == n { print $6 }' "$2"; }

# ---- (i) a run against itself -------------------------------------------------------------------
for run in "$fix/latency-6rounds.json" "$fix/quick.json" "$fix/http.json" "$fix/swift-layer.json"; do
    $compare --tsv "$run" "$run" > "$tmp/self.tsv"
    rows=$(($(wc -l < "$tmp/self.tsv") - 1))
    changed=$(awk -F'\t' 'NR > 1 && $6 != "no difference" && $6 != "no rounds"' "$tmp/self.tsv")
    if [ "$rows" -lt 10 ]; then fail "$run against itself: only $rows metrics"
    elif [ -n "$changed" ]; then fail "$run against itself: differences: $changed"
    else ok "$run against itself: $rows metrics, none differs"; fi
done
$compare --tsv "$fix/http.json" "$fix/http.json" > "$tmp/http.tsv"
[ "$(verdict 'CRunLoop: http requests/s at 100 connections' "$tmp/http.tsv")" = "no rounds" ] &&
    ok "figures without rounds: no rounds" || fail "http figures should say no rounds"
if $compare "$fix/quick.json" "$fix/quick.json" --fail-on 'wakeup one-way p99' \
        --fail-on 'libuv: wakeup ping-pong p50:5' >/dev/null; then
    ok "--fail-on passes on identical runs"
else fail "--fail-on failed on identical runs"; fi
set +e
$compare "$fix/quick.json" "$fix/quick.json" --fail-on 'wakeup one-way p98' >/dev/null 2>"$tmp/err"
rc=$?
set -e
if [ $rc = 2 ] && grep -q 'CRunLoop: wakeup one-way p99$' "$tmp/err"; then
    ok "unknown --fail-on name: exit 2 with the list"
else fail "unknown --fail-on name: exit $rc"; fi

# ---- (iii) every one-way figure 30% worse --------------------------------------------------------
python3 benchmarks/tests/make-worse.py "$fix/latency-6rounds.json" "$tmp/worse.json" 30 >/dev/null
set +e
$compare "$fix/latency-6rounds.json" "$tmp/worse.json" --fail-on 'wakeup one-way p99' > "$tmp/iii.out" 2>&1
rc=$?
$compare "$fix/latency-6rounds.json" "$tmp/worse.json" --fail-on 'wakeup one-way p99:40' > "$tmp/iii40.out" 2>&1
rc40=$?
set -e
if [ $rc = 1 ] && grep -q 'fail-on FAIL: CRunLoop: wakeup one-way p99: +30.0%' "$tmp/iii.out"; then
    ok "one-way 30% worse: --fail-on 'wakeup one-way p99' exits 1"
else fail "one-way 30% worse: --fail-on 'wakeup one-way p99' exited $rc"; cat "$tmp/iii.out"; fi
[ $rc40 = 0 ] && ok "... and passes with a 40% slack" || { fail "40% slack: exit $rc40"; cat "$tmp/iii40.out"; }
$compare --tsv "$fix/latency-6rounds.json" "$tmp/worse.json" > "$tmp/iii.tsv"
v=$(verdict 'CRunLoop: wakeup ping-pong p50' "$tmp/iii.tsv")
[ "$v" = "no difference" ] && ok "ping-pong untouched: no difference" || fail "ping-pong untouched: $v"

# ---- (ii) a 50 us spin against none, measured ----------------------------------------------------
if [ "$(nproc)" -lt 2 ]; then
    echo "compare-check: (ii) skipped: fewer than 2 CPUs"
else
    CC=${CC:-cc}
    make -s --no-print-directory CC="$CC" BUILD=build/bench build/bench/libcrunloop.a
    make -s --no-print-directory -C benchmarks CC="$CC" CORE_LIB=../build/bench/libcrunloop.a OUT=../build/bench
    for spin in 0 50; do
        BENCH_CRUNLOOP_SPIN_US=$spin python3 -c '
import ctypes, os, sys
if ctypes.CDLL(None, use_errno=True).prctl(29, 1000, 0, 0, 0) != 0:   # PR_SET_TIMERSLACK, 1 us
    sys.exit("prctl(PR_SET_TIMERSLACK) failed")
os.execv(sys.argv[1], sys.argv[1:])' build/bench/crunloop-bench --quick --bench latency \
            --only CRunLoop --rounds 8 --json "$tmp/spin$spin/latest.json" > "$tmp/spin$spin.log"
    done
    grep -q 'BENCH_CRUNLOOP_SPIN_US=50' "$tmp/spin50/latest.json" || fail "the spin run does not say its spin"
    $compare --tsv "$tmp/spin0/latest.json" "$tmp/spin50/latest.json" > "$tmp/ii.tsv"
    $compare --tsv "$tmp/spin50/latest.json" "$tmp/spin0/latest.json" > "$tmp/ii-rev.tsv"
    v=$(verdict 'CRunLoop: wakeup one-way p50' "$tmp/ii.tsv")
    rv=$(verdict 'CRunLoop: wakeup one-way p50' "$tmp/ii-rev.tsv")
    line=$(awk -F'\t' '$1 == "CRunLoop: wakeup one-way p50" { print "A " $2 " ns, B " $3 " ns, p " $5 }' "$tmp/ii.tsv")
    if [ "$v" = faster ] && [ "$rv" = slower ]; then ok "spin 50 us vs 0: one-way p50 faster ($line)"
    else fail "spin 50 us vs 0: one-way p50 '$v', reversed '$rv' ($line)"; fi
    if $compare "$tmp/spin50/latest.json" "$tmp/spin0/latest.json" --fail-on 'wakeup one-way p50:10' >/dev/null 2>&1; then
        fail "spin 0 after 50 us: --fail-on 'wakeup one-way p50:10' passed"
    else ok "spin 0 after 50 us: --fail-on 'wakeup one-way p50:10' fails"; fi
fi

if [ $fails -gt 0 ]; then echo "compare-check: $fails failure(s)"; exit 1; fi
echo "compare-check: all passed"
