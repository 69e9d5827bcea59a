#!/usr/bin/env bash
# The test command (README, CI): builds the package and the shim (debug),
# runs the Swift test suites with `swift test`, then the shim's own C tests
# under ASan/UBSan and TSan, then each fuzz target for 10 s (scripts/fuzz.sh;
# TIMECTL_FUZZ_SECONDS to change), then builds the documentation (warnings fail).
#   scripts/test.sh [swift test arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh -c debug
swift test "$@"
scripts/test-shim-sanitizers.sh
scripts/fuzz.sh "${TIMECTL_FUZZ_SECONDS:-10}"
scripts/docs.sh >/dev/null
