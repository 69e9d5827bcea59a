#!/usr/bin/env bash
# The test command (README, CI): installs the Debian packages the tests use
# (scripts/install-deps.sh), checks that the shim's C includes only
# downward through its layers (scripts/check-layers, and its self-test),
# builds the package and the shim (debug; with musl-gcc its musl build too),
# cross-compiles the shim, the static loader and the core for aarch64
# (warnings are errors), runs the Swift test suites with `swift test` (the
# aarch64 build among them, under qemu-user), then the shim's own C tests
# under ASan/UBSan and TSan and as an aarch64 program under qemu-user
# (scripts/test-shim-aarch64.sh), each fuzz target for 10 s (scripts/fuzz.sh;
# TIMECTL_FUZZ_SECONDS to change), builds the documentation (warnings fail),
# runs a throw-away package that depends on this one under plain `swift
# test`, then builds the release build and checks timectl installed into a
# temporary prefix (man page, completions, a command run attached) and the
# Debian package (contents, lintian, an unpacked copy run attached).
#   scripts/test.sh [swift test arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/check-layers
scripts/test-check-layers.sh
scripts/build.sh -c debug
CC=aarch64-linux-gnu-gcc scripts/build-shim.sh "$(swift build -c debug --show-bin-path)/aarch64-linux-gnu/libTimeShim.so"
# The suites print thousands of lines and CI shows only the end: a failure's
# own lines are printed again last.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! swift test "$@" 2>&1 | tee "$log"; then
    echo "== swift test failed; what failed, again:"
    grep -E -A6 '✘|error:|Fatal error|Assertion failed' "$log" | grep -v '^--$' | tail -n 120
    exit 1
fi
scripts/test-shim-sanitizers.sh
scripts/test-shim-aarch64.sh
scripts/fuzz.sh "${TIMECTL_FUZZ_SECONDS:-10}"
scripts/docs.sh >/dev/null
scripts/test-as-dependency.sh
scripts/build.sh -c release
scripts/test-install.sh
scripts/test-package-deb.sh
