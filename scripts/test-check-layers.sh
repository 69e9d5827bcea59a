#!/usr/bin/env bash
# The self-test of scripts/check-layers (scripts/test.sh runs it): the real
# tree passes; a copy in which the lowest layer includes a header of the
# top one, and a copy in which two files of one layer include each other,
# both fail, each with a line naming what is wrong.
#   scripts/test-check-layers.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=$root/scripts/check-layers
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "test-check-layers: $*" >&2; exit 1; }

"$check" -q || fail "the real tree does not pass"

# An include upward: core (the lowest layer) includes attach/'s header (the top one).
cp -R "$root/Sources/TimeShimC" "$work/upward"
header=$(cd "$work/upward/shim/attach" && ls -- *.h | head -1)
[ -n "$header" ] || fail "shim/attach/ has no header to include"
sed -i "0,/^#include/s|^#include|#include \"../shim/attach/$header\"\n#include|" "$work/upward/core/segment_file.c"
grep -q "shim/attach/$header" "$work/upward/core/segment_file.c" || fail "could not plant the upward include"
if "$check" --root "$work/upward" 2>"$work/upward.err"; then fail "an upward include (core -> attach) passed"; fi
grep -q "core/segment_file.c (core) includes shim/attach/$header (attach), a layer above its own" "$work/upward.err" \
    || fail "the upward include was not named: $(cat "$work/upward.err")"

# A cycle inside one layer: two files of runtime/ that include each other.
cp -R "$root/Sources/TimeShimC" "$work/cycle"
sed -i '0,/^#include/s|^#include|#include "threads.h"\n#include|' "$work/cycle/shim/runtime/process.h"
sed -i '0,/^#include/s|^#include|#include "process.h"\n#include|' "$work/cycle/shim/runtime/threads.h"
if "$check" --root "$work/cycle" 2>"$work/cycle.err"; then fail "an include cycle passed"; fi
grep -q "include cycle between files: .*shim/runtime/process.*shim/runtime/threads" "$work/cycle.err" \
    || fail "the cycle was not named: $(cat "$work/cycle.err")"

help=$("$check" --help)
grep -q "layer above its own" <<<"$help" || fail "--help does not describe the check"
echo "test-check-layers: passed (real tree clean; an upward include and a cycle both caught)"
