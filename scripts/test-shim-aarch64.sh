#!/usr/bin/env bash
# The shim's C tests (Tests/ShimC) as an aarch64 program: compiled with the
# shim's sources by Debian's cross compiler (aarch64-linux-gnu-gcc, warnings
# are errors) and run under qemu-user. They re-run themselves through
# /proc/self/exe, an exec of an aarch64 program, so they run inside
# scripts/with-aarch64-binfmt.sh. What qemu-user cannot show (the seccomp
# trap, the vDSO) is listed in docs/limits.md.
#   scripts/test-shim-aarch64.sh        ($AARCH64_CC, default aarch64-linux-gnu-gcc)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/Sources/TimeShimC
cc=${AARCH64_CC:-aarch64-linux-gnu-gcc}
command -v "$cc" >/dev/null || { echo "test-shim-aarch64.sh: $cc is missing (apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The shim's sources are those its build compiles (shim-cc-arguments: the lines that are not flags).
sources=($(cd "$src" && sed -e 's/#.*//' -e '/^[[:space:]]*-/d' -e '/^[[:space:]]*$/d' shim-cc-arguments | while read -r pattern; do
    for file in $pattern; do echo "$src/$file"; done
done) "$root"/Tests/ShimC/*.c)
echo "== shim tests, aarch64, under qemu-user"
"$cc" -std=gnu11 -g -O2 -Wall -Wextra -Werror -I "$src/include" -pthread "${sources[@]}" -o "$out/shim_test"
"$root/scripts/with-aarch64-binfmt.sh" "$out/shim_test"
