#!/usr/bin/env bash
# Builds the DocC documentation of module RunLoop without any package dependency: symbol graphs
# from the compiler, then the toolchain's `docc convert` (warnings are errors, so broken symbol
# links fail the build) into a static website: a folder any web server serves as it is.
#
#   Scripts/build-docs.sh [OUTPUT]     default OUTPUT: build/docs
#
# To read it: python3 -m http.server -b 127.0.0.1 -d build/docs 8000, then open
# http://127.0.0.1:8000/ (it leads to documentation/runloop/). Opened from disk (file://) the pages
# stay blank: they load their scripts and content from absolute paths on the server.
#
# Environment: SWIFT (default swift), DOCC (default: docc next to swift, else on PATH),
# DOCS_BASE_PATH (default empty: the site at the root of its server; say crunloop for a site
# served at https://host/crunloop/).
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
scratch=.build-docs
out=${1:-build/docs}
base_path=${DOCS_BASE_PATH:-}
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
mkdir -p "$(dirname "$out")"
"$DOCC" convert Sources/RunLoop/RunLoop.docc \
    --additional-symbol-graph-dir "$graphs" \
    --fallback-display-name RunLoop \
    --fallback-bundle-identifier org.crunloop.RunLoop \
    --warnings-as-errors \
    --transform-for-static-hosting \
    ${base_path:+--hosting-base-path "$base_path"} \
    --output-path "$out"
# What a reader opens: fail here, not in their browser, if the site lacks it.
for f in index.html documentation/runloop/index.html data/documentation/runloop.json; do
    [ -s "$out/$f" ] || { echo "build-docs: $out/$f is missing" >&2; exit 1; }
done
# DocC's page at the site's root says "The page you're looking for can't be found"; send the
# reader to the module's page instead (each page has its own copy of DocC's index.html).
cat > "$out/index.html" <<'HTML'
<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>RunLoop</title>
<meta http-equiv="refresh" content="0; url=documentation/runloop/"></head>
<body><a href="documentation/runloop/">RunLoop documentation</a></body></html>
HTML
if [ -z "$base_path" ]; then
    echo "build-docs: wrote $out; to read it, python3 -m http.server -b 127.0.0.1 -d $out 8000"
    echo "  and open http://127.0.0.1:8000/"
else
    echo "build-docs: wrote $out, a site to serve at /$base_path/ (its pages: /$base_path/documentation/runloop/)"
fi
