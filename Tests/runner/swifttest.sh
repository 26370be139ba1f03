#!/bin/sh
# swifttest.sh COMMAND... - run a `swift test` command, and when it fails, repeat the lines that
# say what failed after everything else. A failing run prints thousands of progress lines, and a
# CI log that keeps only its tail would otherwise lose the failing case's name and message.
log=$(mktemp "${TMPDIR:-/tmp}/swifttest.XXXXXX") || exit 1
status_file="$log.status"
{ "$@" 2>&1; echo $? >"$status_file"; } | tee "$log"
status=$(cat "$status_file")
if [ "$status" != 0 ]; then
    echo "---- swifttest.sh: what failed (exit $status) ----"
    grep -E 'recorded an issue|✘|error:|ERROR: |SUMMARY: |fatal error|Fatal error|WARNING: ThreadSanitizer' "$log" | tail -n 60
fi
rm -f "$log" "$status_file"
exit "$status"
