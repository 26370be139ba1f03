#!/usr/bin/env bash
# Builds the DocC documentation of module RunLoop without any package dependency: symbol graphs
# from the compiler, then the toolchain's `docc convert` (warnings are errors, so broken symbol
# links fail the build).
#
#   Scripts/build-docs.sh [OUTPUT]     default OUTPUT: .build-docs/RunLoop.doccarchive
#
# Environment: SWIFT (default swift), DOCC (default: docc next to swift, else on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
scratch=.build-docs
out=${1:-$scratch/RunLoop.doccarchive}
graphs=$scratch/symbol-graphs

if [ -z "${DOCC:-}" ]; then
    swift_bin=$(command -v "$SWIFT" || true)
    if [ -n "$swift_bin" ] && [ -x "$(dirname "$(readlink -f "$swift_bin")")/docc" ]; then
        DOCC=$(dirname "$(readlink -f "$swift_bin")")/docc
    elif command -v docc >/dev/null 2>&1; then
        DOCC=docc
    elif [ -x /opt/swift/usr/bin/docc ]; then
        DOCC=/opt/swift/usr/bin/docc
    else
        echo "build-docs: docc not found (set DOCC)" >&2
        exit 1
    fi
fi

# The graphs come out only when RunLoop compiles, so they are kept between runs: an up-to-date
# build emits nothing, and the graphs of its last compile still match the sources. If they are
# missing anyway, or the scratch folder is broken, start from an empty one.
build() {
    mkdir -p "$graphs"
    "$SWIFT" build --scratch-path "$scratch" --target RunLoop \
        -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$PWD/$graphs"
}
if ! build || [ ! -f "$graphs/RunLoop.symbols.json" ]; then
    rm -rf "$scratch"
    build
fi
# Only this module's graphs (RunLoop.symbols.json and its extension graphs RunLoop@*.json).
find "$graphs" -name '*.symbols.json' ! -name 'RunLoop.symbols.json' ! -name 'RunLoop@*' -delete

rm -rf "$out"
"$DOCC" convert Sources/RunLoop/RunLoop.docc \
    --additional-symbol-graph-dir "$graphs" \
    --fallback-display-name RunLoop \
    --fallback-bundle-identifier org.crunloop.RunLoop \
    --warnings-as-errors \
    --output-path "$out"
echo "build-docs: wrote $out"
