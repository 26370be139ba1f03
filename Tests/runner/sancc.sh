#!/bin/sh
# sancc.sh SANITIZER CC... - print the first of the C compilers CC... whose -fsanitize=SANITIZER
# builds and runs a small threaded program here (runtime present, linkable, working), or fail.
# The Swift toolchain's clang, for one, ships a ThreadSanitizer runtime that needs libdispatch.
set -u
san=$1; shift
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
cat > "$dir/probe.c" <<'PROBE'
#include <pthread.h>
#include <stdlib.h>
static void *run(void *arg) { return arg; }
int main(void)
{
    pthread_t thread;
    char *p = malloc(16);
    if (pthread_create(&thread, NULL, run, p) != 0 || pthread_join(thread, NULL) != 0)
        return 1;
    free(p);
    return 0;
}
PROBE
for cc in "$@"; do
    [ -n "$cc" ] || continue
    command -v "$cc" >/dev/null 2>&1 || continue
    if "$cc" -fsanitize="$san" -pthread -o "$dir/probe" "$dir/probe.c" >/dev/null 2>&1 &&
       "$dir/probe" >/dev/null 2>&1; then
        echo "$cc"
        exit 0
    fi
    echo "sancc.sh: $cc -fsanitize=$san does not work here" >&2
done
echo "sancc.sh: no C compiler with a working -fsanitize=$san among: $*" >&2
exit 1
