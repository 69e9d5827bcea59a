#!/usr/bin/env bash
# Compiles libTimeShim.so with the C compiler alone: it must need nothing
# but libc, so SwiftPM (which links in the Swift runtime) cannot build it.
#   scripts/build-shim.sh OUTPUT [EXTRA_CFLAGS...]
set -euo pipefail
if [ $# -lt 1 ]; then
    echo "usage: scripts/build-shim.sh OUTPUT.so [extra cc flags]" >&2
    exit 2
fi
output=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/Sources/TimeShimC
cc=${CC:-cc}
mkdir -p "$(dirname "$output")"
# The shared core (realclock.c, segment.c, trace.c, program.c) and the interposers; controller.c
# marks controllers and must never be part of the shim.
"$cc" -shared -fPIC -O2 -g -std=gnu11 -Wall -Wextra -Werror \
    -fvisibility=hidden -fno-strict-aliasing \
    -Wl,-z,now -Wl,-z,relro -Wl,--no-undefined -Wl,--as-needed \
    -I "$src/include" \
    "$src/realclock.c" "$src/segment.c" "$src/trace.c" "$src/program.c" "$src"/interpose/*.c \
    "$@" -o "$output.tmp.$$"
mv -f "$output.tmp.$$" "$output"
# Anything beyond libc here would load into every controlled program.
extra=$(readelf -d "$output" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' \
    | grep -Ev '^(libc\.so\.6|ld-linux-x86-64\.so\.2|ld-linux-aarch64\.so\.1)$' || true)
if [ -n "$extra" ]; then
    echo "build-shim.sh: $output needs more than libc: $extra" >&2
    exit 1
fi
