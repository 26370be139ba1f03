#!/usr/bin/env bash
# Checks the SwiftPM example of README.md as a user would run it (`make readme-check`).
#
# Takes the blocks of README.md marked with `<!-- readme-check: NAME -->` on the line before
# their fence (Package.swift, main.swift and output), writes a package `hello` from the first two
# next to a folder `crunloop` (a symlink to this checkout, so that the README's path dependency
# "../crunloop" and its package identity "crunloop" hold), builds it, runs it, and compares what
# it prints with the output block. Fails when a block is missing, the package does not build,
# main.swift has warnings, the program fails or its output differs.
#
# Everything lives in .build-readme/ (ignored by git): the package is written again on each run,
# its build folder is kept so that a second run only recompiles what changed.
#
# Environment: SWIFT (default swift), README_CHECK_TIMEOUT (seconds for the program, default 60).
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
timeout_s=${README_CHECK_TIMEOUT:-60}
root=$PWD
work=$root/.build-readme
pkg=$work/hello

# Prints the body of the fenced block right after the marker line of NAME; fails without one.
block() {
    awk -v name="$1" '
        $0 == "<!-- readme-check: " name " -->" { marker = NR; next }
        marker && NR == marker + 1 {
            if ($0 !~ /^```/) { print "marker of " name " is not right before a fence" > "/dev/stderr"; exit 2 }
            inside = 1; found = 1; next
        }
        inside && /^```[[:space:]]*$/ { inside = 0; marker = 0; exit }
        inside { print }
        END {
            if (!found) { print "no block marked <!-- readme-check: " name " -->" > "/dev/stderr"; exit 2 }
            if (inside) { print "the block of " name " has no closing fence" > "/dev/stderr"; exit 2 }
        }
    ' README.md
}

fail() { echo "readme-check: $*" >&2; exit 1; }

manifest=$(block Package.swift) || fail "README.md: no Package.swift block"
program=$(block main.swift) || fail "README.md: no main.swift block"
expected=$(block output) || fail "README.md: no output block"
[ -n "$manifest" ] && [ -n "$program" ] && [ -n "$expected" ] || fail "README.md: an empty block"

mkdir -p "$work"
ln -sfn "$root" "$work/crunloop"
rm -rf "$pkg/Sources" "$pkg/Package.swift" "$pkg/Package.resolved"
mkdir -p "$pkg/Sources/hello"
printf '%s\n' "$manifest" > "$pkg/Package.swift"
printf '%s\n' "$program" > "$pkg/Sources/hello/main.swift"

# Without CC: a CC in the environment (make test's sub-makes pass CC=gcc) would compile the C
# targets with a compiler that knows no -fblocks.
log=$work/build.log
echo "readme-check: swift build in $pkg (dependency ../crunloop -> $root)"
if ! (cd "$pkg" && env -u CC "$SWIFT" build --scratch-path "$pkg/.build") > "$log" 2>&1; then
    cat "$log" >&2
    fail "the README's package does not build (log: $log)"
fi
if grep -E 'main\.swift:[0-9]+:[0-9]+: (warning|error):' "$log" >&2; then
    fail "the README's main.swift has the warnings above"
fi

bin=$(cd "$pkg" && env -u CC "$SWIFT" build --scratch-path "$pkg/.build" --show-bin-path)/hello
echo "readme-check: running $bin"
status=0
actual=$(timeout "$timeout_s" "$bin") || status=$?
[ "$status" -eq 0 ] || { printf '%s\n' "$actual"; fail "hello exited with status $status"; }
if [ "$actual" != "$expected" ]; then
    diff -u <(printf '%s\n' "$expected") <(printf '%s\n' "$actual") \
        --label 'README.md (output block)' --label 'hello printed' >&2 || true
    fail "hello does not print what README.md says"
fi
printf '%s\n' "$actual" | sed 's/^/  | /'
echo "readme-check: ok (README's Package.swift and main.swift build against this checkout as \"crunloop\" and print its output block)"
