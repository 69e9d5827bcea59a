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
# docc copies its HTML template (the toolchain's share/docc/render) into each
# archive, and tries to keep its owner: for a user other than the template's
# owner that fails part-way, and every page then fails with "The file doesn't
# exist". Such a user gets a copy of the template of their own (DOCC_HTML_DIR).
template=$(dirname "$(readlink -f "$(command -v swift)")")/../share/docc/render
if [ -z "${DOCC_HTML_DIR:-}" ] && [ -d "$template" ] && [ "$(stat -c %u "$template")" != "$(id -u)" ]; then
    own_template=$(mktemp -d)
    trap 'rm -rf "$own_template"' EXIT
    cp -R "$template/." "$own_template"
    export DOCC_HTML_DIR=$own_template
fi
mkdir -p "$output"
swift package --allow-writing-to-directory "$output" generate-documentation \
    --target TimeControlKit --output-path "$output" --warnings-as-errors
mkdir -p "$output/TimeControlKitTesting"
swift package --allow-writing-to-directory "$output/TimeControlKitTesting" generate-documentation \
    --target TimeControlKitTesting --output-path "$output/TimeControlKitTesting" --warnings-as-errors
echo "documentation in $output (open it with: swift package --disable-sandbox preview-documentation --target TimeControlKit)"
