#!/usr/bin/env bash
# Proves, on every run of the test command, that the tests and timectl work
# wherever a newcomer puts the checkout (issue 36), without building again
# or running the whole suite again: the debug build's test runner, timectl,
# the shim and the static loader are linked (or copied) into
# "DIR/time ctl/" — DIR a fresh directory only its owner can enter (what
# `mktemp -d` makes, like root's home), the path with a space that
# LD_PRELOAD cannot carry — and, with TMPDIR pointing at another such
# directory, the tests that act as another user, that preload the shim by
# its path, that start static programs through the loader beside it and that
# put a test's own code on its session (the trait starts the runner again,
# attached) run from there; then that timectl runs date and a static program
# on a frozen session. About 15 s.
#   scripts/test-placement.sh        (after `swift build --build-tests`, which swift test does)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "$root" && swift build -c debug --show-bin-path)
runner=$bin/timectlPackageTests.xctest
fail() { echo "test-placement.sh: FAILED: $*" >&2; exit 1; }
[ -x "$runner" ] || fail "$runner is missing: build the tests first (swift build --build-tests)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 0700 "$work"
place="$work/time ctl"
mkdir -m 0700 "$place" "$work/tmp" "$work/cache"
for file in timectlPackageTests.xctest timectl libTimeShim.so timectl-static-loader timectl-swift-probe; do
    ln "$bin/$file" "$place/$file" 2>/dev/null || cp -p "$bin/$file" "$place/$file"
done

# The links timectl makes for the shim go to a cache of this run's own, removed with it.
export TMPDIR="$work/tmp" XDG_CACHE_HOME="$work/cache"
unset TIMECTL_SHIM TIMECTL_SEGMENT TIMECTL_SESSION LD_PRELOAD
tests=(
    'PlacementTests'
    'ClockSettingTests/unprivilegedUser'
    'DamagedSegmentTests/directoryOfAnotherUser'
    'AttachmentTests/(readBeforeTheShimsConstructor|shimLookup)'
    'SegmentTrustTests'
    'StaticProgramTests/readsFrozenClock'
    'TraitOwnCodeTests/dateFollowsTheSession'
)
filter=$(IFS='|'; echo "${tests[*]}")
log=$work/log
if ! (cd "$work/tmp" && "$place/timectlPackageTests.xctest" --testing-library swift-testing --filter "$filter") >"$log" 2>&1; then
    grep -E -A6 '✘|error:|Fatal error' "$log" | tail -n 80
    fail "the tests above failed when run from $place with TMPDIR=$TMPDIR"
fi
grep -q 'Test run with [0-9]* tests* .*passed' "$log" || fail "no test ran: $(tail -n 5 "$log")"
ran=$(sed -n 's/.*Test run with \([0-9]*\) tests*.*/\1/p' "$log" | tail -n 1)

# timectl itself, from there: the shim is preloaded through a link, the static loader found through it.
sessions="$work/sessions"
mkdir -m 0700 "$sessions"
run() { TIMECTL_DIR="$sessions" "$place/timectl" run --at @1451649600 --frozen -- "$@"; }
[ "$(run date -u +%s)" = 1451649600 ] || fail "timectl run -- date from $place did not print the frozen time"
preload=$(run sh -c 'echo "$LD_PRELOAD"')
[[ $preload == "$XDG_CACHE_HOME"/timectl/shim-links/*/libTimeShim.so ]] || fail "LD_PRELOAD is '$preload', not a link in the cache"
static=$work/tmp/print_time
cc -static -O1 -o "$static" "$root/Tests/Fixtures/print_time.c"
[ "$(run "$static")" = 1451649600 ] || fail "a static program run from $place did not print the frozen time"
skipped=$(grep -c ' skipped' "$log" || true)
echo "test-placement.sh: passed ($ran tests, $skipped skipped, and timectl run, from a copy of the build in '$place' under a 0700 directory, TMPDIR a 0700 directory)"
