#!/usr/bin/env bash
# Compiles libTimeShim.so with the C compiler alone: it must need nothing
# but libc, so SwiftPM (which links in the Swift runtime) cannot build it.
# The compiler's arguments are Sources/TimeShimC/shim-cc-arguments, which
# TimeControlKit also reads when it builds the shim for a package that
# depends on it; here warnings are errors besides. Next to it goes
# timectl-static-loader (Sources/TimeShimC/loader-cc-arguments), through
# which timectl runs statically linked programs.
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
output=$(cd "$(dirname "$output")" && pwd)/$(basename "$output")
# The arguments file's relative paths and DIR/*.c globs resolve in $src.
mapfile -t arguments < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$src/shim-cc-arguments")
(cd "$src" && shopt -s failglob && "$cc" ${arguments[@]} -Werror "$@" -o "$output.tmp.$$")
mv -f "$output.tmp.$$" "$output"
loader=$(dirname "$output")/timectl-static-loader
mapfile -t loader_arguments < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$src/loader-cc-arguments")
(cd "$src" && "$cc" ${loader_arguments[@]} -Werror -o "$loader.tmp.$$")
mv -f "$loader.tmp.$$" "$loader"
# Anything beyond libc here would load into every controlled program.
extra=$(readelf -d "$output" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' \
    | grep -Ev '^(libc\.so\.6|ld-linux-x86-64\.so\.2|ld-linux-aarch64\.so\.1)$' || true)
if [ -n "$extra" ]; then
    echo "build-shim.sh: $output needs more than libc: $extra" >&2
    exit 1
fi
# The part SwiftPM compiles (the shared core above, and controller/) gets
# the same warnings here: a package's unsafeFlags would make TimeControlKit
# unusable as a dependency.
"$cc" -fsyntax-only -std=gnu11 -Wall -Wextra -Werror -I "$src/include" "$src"/controller/*.c
