#!/usr/bin/env bash
# Checks the prose documentation first (scripts/check-docs: README.md at
# most 20,000 characters, no citation of this project's issues or internal
# specification, every relative link of README.md and docs/*.md inside the
# checkout), then builds the DocC documentation of TimeControlKit and of
# TimeControlKitTesting (its test trait and XCTest helper; in
# OUTPUT_DIRECTORY/TimeControlKitTesting), failing on any warning (a symbol
# link that no longer matches the code, an undocumented parameter).
#   scripts/docs.sh [OUTPUT_DIRECTORY]      (default .build/docs)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/check-docs
output=${1:-.build/docs}
mkdir -p "$output"
swift package --allow-writing-to-directory "$output" generate-documentation \
    --target TimeControlKit --output-path "$output" --warnings-as-errors
mkdir -p "$output/TimeControlKitTesting"
swift package --allow-writing-to-directory "$output/TimeControlKitTesting" generate-documentation \
    --target TimeControlKitTesting --output-path "$output/TimeControlKitTesting" --warnings-as-errors
echo "documentation in $output (open it with: swift package --disable-sandbox preview-documentation --target TimeControlKit)"
