#!/usr/bin/env bash
# Writes timectl's man page and its bash, zsh and fish completion scripts,
# all generated from the command line's own definitions (ArgumentParser):
#   OUTDIR/timectl.1  OUTDIR/timectl.bash  OUTDIR/_timectl  OUTDIR/timectl.fish
#   scripts/generate-manual-and-completions.sh OUTDIR
# The man page comes from swift-argument-parser's generate-manual plugin,
# run on a debug build (its release build would relink .build/release/timectl
# without -static-executable); the text is the same in either.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: scripts/generate-manual-and-completions.sh OUTDIR" >&2; exit 2; }
mkdir -p "$1"
out=$(cd "$1" && pwd)
cd "$(dirname "$0")/.."
# The page's date is the last commit's, so the same sources give the same page.
date=$(git log -1 --format=%cs 2>/dev/null || date -u +%F)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
swift package plugin generate-manual --configuration debug --date "$date" >"$log" 2>&1 \
    || { cat "$log" >&2; echo "generate-manual-and-completions.sh: the generate-manual plugin failed" >&2; exit 1; }
generated=.build/plugins/GenerateManual/outputs/timectl/timectl.1
# ArgumentParser leaves an empty line between paragraphs of a discussion;
# mdoc wants .Pp there (man warns, lintian complains).
sed 's/^$/.Pp/' "$generated" > "$out/timectl.1"
timectl=$(swift build -c debug --show-bin-path)/timectl
# A completion script is sourced, never run: no #! line.
"$timectl" --generate-completion-script bash | sed '1{/^#!/d}' > "$out/timectl.bash"
"$timectl" --generate-completion-script zsh > "$out/_timectl"
"$timectl" --generate-completion-script fish > "$out/timectl.fish"
