#!/usr/bin/env bash
# The test command (README, CI): installs the Debian packages the tests use
# (scripts/install-deps.sh), checks that the shim's C includes only
# downward through its layers (scripts/check-layers, and its self-test),
# builds the package and the shim (debug; with musl-gcc its musl build too),
# cross-compiles the shim, the static loader and the core for aarch64
# (warnings are errors), runs the Swift test suites with `swift test` (the
# aarch64 build among them, under qemu-user), then some of them again from a
# copy of the build under a private directory and a path with a space
# (scripts/test-placement.sh), the shim's own C tests under ASan/UBSan and
# TSan and as an aarch64 program under qemu-user
# (scripts/test-shim-aarch64.sh), each fuzz target for 10 s (scripts/fuzz.sh;
# TIMECTL_FUZZ_SECONDS to change), builds the documentation (warnings fail),
# runs a throw-away package that depends on this one under plain `swift
# test`, then builds the release build, runs libfaketime's own test suite
# against its shim (scripts/test-libfaketime-suite.sh), and checks timectl
# installed into a temporary prefix (man page, completions, a command run
# attached) and the Debian package (contents, lintian, an unpacked copy run
# attached). Last it lists the tests that were skipped, each with its reason
# (run by a user other than root, those that need root).
#   scripts/test.sh [swift test arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/swift-tmpdir.sh
trap '[ -z "$swift_private_tmpdir" ] || rm -rf "$swift_private_tmpdir"' EXIT
scripts/install-deps.sh
scripts/check-layers
scripts/test-check-layers.sh
scripts/build.sh -c debug
CC=aarch64-linux-gnu-gcc scripts/build-shim.sh "$(swift build -c debug --show-bin-path)/aarch64-linux-gnu/libTimeShim.so"
# The suites print thousands of lines and CI shows only the end: a failure's
# own lines are printed again last.
log=$(mktemp)
trap 'rm -f "$log"; [ -z "$swift_private_tmpdir" ] || rm -rf "$swift_private_tmpdir"' EXIT
if ! swift test "$@" 2>&1 | tee "$log"; then
    echo "== swift test failed; what failed, again:"
    grep -E -A6 '✘|error:|Fatal error|Assertion failed' "$log" | grep -v '^--$' | tail -n 120
    exit 1
fi
scripts/test-placement.sh
scripts/test-shim-sanitizers.sh
scripts/test-shim-aarch64.sh
scripts/fuzz.sh "${TIMECTL_FUZZ_SECONDS:-10}"
scripts/docs.sh >/dev/null
scripts/test-as-dependency.sh
scripts/build.sh -c release
scripts/test-libfaketime-suite.sh .build/release/libTimeShim.so
scripts/test-install.sh
scripts/test-package-deb.sh
# Swift Testing: ➜ Test "NAME" skipped: "WHY" (or with no reason: "skipped."); XCTest: FILE:LINE: CLASS.test : Test skipped - WHY
skipped=$(sed -n -e 's/^.*➜[^ ]* Test \(.*\) skipped: \(.*\)$/    \1: \2/p' \
                 -e 's/^.*➜[^ ]* Test \(.*\) skipped\.$/    \1: (no reason given)/p' \
                 -e 's/^.*: \([A-Za-z0-9_.]*\) : Test skipped - \(.*\)$/    \1: "\2"/p' "$log")
echo "test.sh: passed; skipped: $(printf '%s' "$skipped" | grep -c . || true) tests, each with its reason"
[ -z "$skipped" ] || printf '%s\n' "$skipped"
