#!/usr/bin/env bash
# Compiles the build of the shim for musl programs, libTimeShim-musl.so,
# with musl-gcc (Debian's musl-tools): a program that musl's dynamic loader
# starts (PT_INTERP /lib/ld-musl-*) cannot load the glibc build, so timectl
# and the shim preload this one, from beside libTimeShim.so, wherever such a
# program is started (docs/installing.md). Same sources and arguments as
# scripts/build-shim.sh (Sources/TimeShimC/shim-cc-arguments), warnings are
# errors; it must need nothing but musl's libc.so. The static loader is not
# built here: static programs, musl's too, run through the glibc one.
#   scripts/build-shim-musl.sh OUTPUT [EXTRA_CFLAGS...]    ($MUSL_CC, default musl-gcc)
set -euo pipefail
if [ $# -lt 1 ]; then
    echo "usage: scripts/build-shim-musl.sh OUTPUT.so [extra cc flags]" >&2
    exit 2
fi
output=$1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/Sources/TimeShimC
cc=${MUSL_CC:-musl-gcc}
if ! command -v "$cc" >/dev/null; then
    echo "build-shim-musl.sh: $cc not found: install musl-tools (apt-get install musl-tools)" >&2
    exit 1
fi
mkdir -p "$(dirname "$output")"
output=$(cd "$(dirname "$output")" && pwd)/$(basename "$output")
# musl-gcc searches musl's headers only; the shim also needs the kernel's (linux/futex.h, linux/seccomp.h…),
# which musl programs share with glibc ones. Only those directories are added, never glibc's own headers.
headers=$(mktemp -d)
trap 'rm -rf "$headers"' EXIT
multiarch=$(gcc -print-multiarch 2>/dev/null || true)
for directory in linux asm-generic; do ln -s "/usr/include/$directory" "$headers/$directory"; done
if [ -n "$multiarch" ] && [ -d "/usr/include/$multiarch/asm" ]; then
    ln -s "/usr/include/$multiarch/asm" "$headers/asm"
else
    ln -s /usr/include/asm "$headers/asm"
fi
mapfile -t arguments < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$src/shim-cc-arguments")
(cd "$src" && shopt -s failglob && "$cc" ${arguments[@]} -Werror -isystem "$headers" "$@" -o "$output.tmp.$$")
# Anything beyond musl's libc.so (which is also its loader) would have to load into every musl program.
extra=$(readelf -d "$output.tmp.$$" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | grep -Ev '^libc\.so$' || true)
if [ -n "$extra" ]; then
    rm -f "$output.tmp.$$"
    echo "build-shim-musl.sh: $output needs more than musl's libc: $extra" >&2
    exit 1
fi
mv -f "$output.tmp.$$" "$output"
