#!/usr/bin/env bash
# Runs the shim's C tests (Tests/ShimC) with the shim compiled in, under
# AddressSanitizer + UndefinedBehaviorSanitizer and under ThreadSanitizer:
# the shim lives inside other people's processes, so its bugs become theirs.
#   scripts/test-shim-sanitizers.sh        (uses $CC, default gcc: the Swift
#   toolchain's clang ships a TSan runtime that expects libdispatch)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/Sources/TimeShimC
cc=${CC:-gcc}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The shim's sources are those its build compiles (shim-cc-arguments: the lines that are not flags).
# One a line, so that a checkout whose path holds a space stays whole.
mapfile -t sources < <(cd "$src" && sed -e 's/#.*//' -e '/^[[:space:]]*-/d' -e '/^[[:space:]]*$/d' shim-cc-arguments | while read -r pattern; do
    for file in $pattern; do echo "$src/$file"; done
done)
sources+=("$root"/Tests/ShimC/*.c)
common=(-std=gnu11 -g -O1 -Wall -Wextra -Werror -fno-omit-frame-pointer -I "$src/include" -pthread)

echo "== shim tests, no sanitizer"
"$cc" "${common[@]}" -O2 "${sources[@]}" -o "$out/shim_test"
"$out/shim_test"

echo "== shim tests under ASan + UBSan"
"$cc" "${common[@]}" -fsanitize=address,undefined -fno-sanitize-recover=all "${sources[@]}" -o "$out/shim_test_asan"
# ASan cannot unwind a thread cancelled from glibc's cancellation signal
# handler (it aborts in its own stack checks): that test runs in the other two builds.
SHIM_TEST_NO_ASYNC_CANCEL=1 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 "$out/shim_test_asan"

echo "== shim tests under TSan"
# -Wno-tsan: TSan models no standalone fences; every access they order is
# itself atomic, so what TSan checks (plain accesses racing) still holds.
"$cc" "${common[@]}" -fsanitize=thread -Wno-tsan "${sources[@]}" -o "$out/shim_test_tsan"
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 "$out/shim_test_tsan"
