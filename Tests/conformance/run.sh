#!/bin/sh
# run.sh - differential conformance: the scenarios of scenarios.c against Apple's CFRunLoop (from
# the Swift toolchain's libFoundation.so) and against crunloop; their traces must be identical.
#
# Run from the repository root:   sh Tests/conformance/run.sh [scenario...]
# Environment:
#   CC              C compiler for the crunloop build (default: cc)
#   CRUNLOOP_BUILD  directory holding libcrunloop.a (default: build); when it has no
#                   libcrunloop.a, or one older than the core's sources, the core's sources
#                   are compiled in directly
#   SWIFT_LIB       the toolchain's lib/swift directory (default: found from `swift` on PATH)
#   CF_CC           compiler for the CF build (default: clang from the toolchain, then PATH)
# Prints one PASS/DIFF line per scenario and "N passed, N failed"; exits 1 on any difference.

set -u

ROOT=$(pwd)
HERE="$ROOT/Tests/conformance"
OUT="$ROOT/build/conformance"
CC=${CC:-cc}
CRUNLOOP_BUILD=${CRUNLOOP_BUILD:-$ROOT/build}

die() { echo "conformance: $*" >&2; exit 1; }

[ -f "$HERE/scenarios.c" ] || die "run me from the repository root (no Tests/conformance/scenarios.c here)"
mkdir -p "$OUT" || die "cannot create $OUT"

# ---- the CoreFoundation build ------------------------------------------------------------------
if [ -z "${SWIFT_LIB:-}" ]; then
    swift_bin=$(command -v swift 2>/dev/null) || die "swift not on PATH (set SWIFT_LIB to the toolchain's lib/swift)"
    swift_bin=$(readlink -f "$swift_bin")
    SWIFT_LIB=$(dirname "$(dirname "$swift_bin")")/lib/swift
fi
[ -f "$SWIFT_LIB/CoreFoundation/CoreFoundation.h" ] || die "no CoreFoundation headers under $SWIFT_LIB"
[ -d "$SWIFT_LIB/linux" ] || die "no $SWIFT_LIB/linux"
if [ -z "${CF_CC:-}" ]; then
    if [ -x "$(dirname "$SWIFT_LIB")/../bin/clang" ]; then
        CF_CC=$(dirname "$SWIFT_LIB")/../bin/clang
    else
        CF_CC=clang
    fi
fi

echo "conformance: building the CF variant ($CF_CC, $SWIFT_LIB)"
"$CF_CC" -fblocks -DBACKEND_CF -O1 -g -Wall -Wextra -Werror \
    -isystem "$SWIFT_LIB" -isystem "$SWIFT_LIB/CoreFoundation" \
    "$HERE/scenarios.c" -o "$OUT/scenarios_cf" \
    -L"$SWIFT_LIB/linux" -lFoundation -lBlocksRuntime -lpthread -Wl,-rpath,"$SWIFT_LIB/linux" \
    || die "the CF variant does not compile"

# ---- the crunloop build ------------------------------------------------------------------------
RL_FLAGS="-std=c11 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -pthread -I$ROOT/Sources/CRunLoopCore/include"
use_lib=no
if [ -f "$CRUNLOOP_BUILD/libcrunloop.a" ]; then
    use_lib=yes
    # An archive older than the core's sources is stale: compile the sources instead.
    if [ -n "$(find "$ROOT/Sources/CRunLoopCore" -newer "$CRUNLOOP_BUILD/libcrunloop.a" -type f 2>/dev/null)" ]; then
        echo "conformance: $CRUNLOOP_BUILD/libcrunloop.a is older than the sources; not using it"
        use_lib=no
    fi
fi
if [ $use_lib = yes ]; then
    echo "conformance: building the crunloop variant ($CC, $CRUNLOOP_BUILD/libcrunloop.a)"
    # shellcheck disable=SC2086
    $CC $RL_FLAGS "$HERE/scenarios.c" "$CRUNLOOP_BUILD/libcrunloop.a" -o "$OUT/scenarios_rl" -lm \
        || die "the crunloop variant does not compile"
else
    echo "conformance: building the crunloop variant ($CC, Sources/CRunLoopCore/*.c)"
    # shellcheck disable=SC2086
    $CC $RL_FLAGS -I"$ROOT/Sources/CRunLoopCore" "$HERE/scenarios.c" "$ROOT"/Sources/CRunLoopCore/*.c \
        -o "$OUT/scenarios_rl" -lm \
        || die "the crunloop variant does not compile"
fi

# ---- run and compare ---------------------------------------------------------------------------
if command -v timeout >/dev/null 2>&1; then TMO="timeout 300"; else TMO=""; fi

if [ $# -gt 0 ]; then
    NAMES=$*
else
    NAMES=$("$OUT/scenarios_cf" --list) || die "scenarios_cf --list failed"
fi

# Both variants run at the same time (the scenarios mostly sleep; their margins are wide).
# shellcheck disable=SC2086
( $TMO "$OUT/scenarios_cf" $NAMES >"$OUT/trace_cf.txt" 2>"$OUT/stderr_cf.txt"
  echo "conformance: CF run exited with $?" ) &
cf_pid=$!
# shellcheck disable=SC2086
$TMO "$OUT/scenarios_rl" $NAMES >"$OUT/trace_rl.txt" 2>"$OUT/stderr_rl.txt"
echo "conformance: crunloop run exited with $?"
wait $cf_pid
diff -u "$OUT/trace_cf.txt" "$OUT/trace_rl.txt" >"$OUT/trace.diff" 2>&1

pass=0
fail=0
failed=""
for name in $NAMES; do
    grep "^$name: " "$OUT/trace_cf.txt" >"$OUT/cf.$name.txt"
    grep "^$name: " "$OUT/trace_rl.txt" >"$OUT/rl.$name.txt"
    tries=1
    # A difference may come from machine noise: run the scenario alone, up to twice more.
    while ! cmp -s "$OUT/cf.$name.txt" "$OUT/rl.$name.txt" && [ $tries -lt 3 ]; do
        tries=$((tries + 1))
        $TMO "$OUT/scenarios_cf" "$name" >"$OUT/cf.$name.txt" 2>>"$OUT/stderr_cf.txt"
        $TMO "$OUT/scenarios_rl" "$name" >"$OUT/rl.$name.txt" 2>>"$OUT/stderr_rl.txt"
    done
    if cmp -s "$OUT/cf.$name.txt" "$OUT/rl.$name.txt"; then
        pass=$((pass + 1))
        if [ $tries -gt 1 ]; then echo "PASS $name (after $tries tries)"; else echo "PASS $name"; fi
        rm -f "$OUT/cf.$name.txt" "$OUT/rl.$name.txt"
    else
        fail=$((fail + 1))
        failed="$failed $name"
        echo "DIFF $name"
        diff -u --label "CF $name" --label "crunloop $name" "$OUT/cf.$name.txt" "$OUT/rl.$name.txt" | sed 's/^/    /'
    fi
done

if [ -s "$OUT/stderr_rl.txt" ]; then
    echo "conformance: the crunloop variant wrote to stderr:"
    sed 's/^/    /' "$OUT/stderr_rl.txt" | head -40
fi
echo "conformance: traces in $OUT (trace_cf.txt, trace_rl.txt, trace.diff)"
[ $fail -eq 0 ] || echo "conformance: differing:$failed"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
