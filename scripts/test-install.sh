#!/usr/bin/env bash
# Installs timectl into a temporary prefix (scripts/install.sh) and checks it
# as a user would: `man -l` shows a page that describes every subcommand,
# sourcing the bash completion registers `timectl` and completes
# subcommands, and the installed timectl runs a command attached.
#   scripts/test-install.sh          (builds the release build if missing)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "test-install.sh: FAILED: $*" >&2; exit 1; }
prefix=$work/prefix
"$root/scripts/install.sh" --prefix "$prefix" >/dev/null
timectl=$prefix/bin/timectl

for file in bin/timectl lib/libTimeShim.so lib/libTimeShim-musl.so lib/timectl-static-loader share/man/man1/timectl.1 share/bash-completion/completions/timectl \
            share/zsh/site-functions/_timectl share/fish/vendor_completions.d/timectl.fish; do
    [ -s "$prefix/$file" ] || fail "$prefix/$file was not installed"
done

version=$("$timectl" --version)
grep -q "timectlVersion = \"$version\"" "$root/Sources/timectl/Version.swift" || fail "timectl --version printed '$version'"

# The man page: rendered without complaint, every subcommand (as `timectl --help` lists them) an entry.
page=$(MANWIDTH=120 man -l "$prefix/share/man/man1/timectl.1" 2>"$work/man.err") || fail "man -l failed: $(cat "$work/man.err")"
[ ! -s "$work/man.err" ] || fail "man -l complained: $(cat "$work/man.err")"
subcommands=$("$timectl" --help | awk '/^SUBCOMMANDS:/ { listing = 1; next } listing && /^  [a-z]/ { print $1 } /^$/ { listing = 0 }')
[ "$(echo "$subcommands" | wc -l)" -ge 10 ] || fail "could not read the subcommands from timectl --help: $subcommands"
for subcommand in $subcommands; do
    grep -Eq "^ {5}$subcommand( |$)" <<<"$page" || fail "the man page has no entry for '$subcommand'"
done
# `run` is parsed ahead of ArgumentParser; its page must still show its options.
for option in --auto-advance --max-steps --report --keep-rate; do
    grep -q -- "$option" <<<"$page" || fail "the man page does not describe run $option"
done

# Bash completion: registered when sourced, and it completes subcommands.
completions=$(bash -c "source '$prefix/share/bash-completion/completions/timectl'
    complete -p timectl
    COMP_WORDS=(timectl fr); COMP_CWORD=1; COMP_LINE='timectl fr'; COMP_POINT=\${#COMP_LINE}
    _timectl timectl fr timectl; echo \"\${COMPREPLY[*]}\"") || fail "sourcing the bash completion failed"
grep -q "^complete .* timectl$" <<<"$completions" || fail "the bash completion did not register timectl: $completions"
grep -qw freeze <<<"${completions##*$'\n'}" || fail "the bash completion does not complete 'timectl fr' to freeze: $completions"
if command -v zsh >/dev/null; then zsh -n "$prefix/share/zsh/site-functions/_timectl" || fail "the zsh completion does not parse"; fi
if command -v fish >/dev/null; then fish -n "$prefix/share/fish/vendor_completions.d/timectl.fish" || fail "the fish completion does not parse"; fi

# The installed timectl, on a private session directory, with nothing from this shell.
mkdir -m 0700 "$work/sessions"
run() { env -u TIMECTL_SHIM -u LD_PRELOAD -u TIMECTL_SEGMENT -u TIMECTL_SESSION TIMECTL_DIR="$work/sessions" "$timectl" "$@"; }
run freeze @1451649600
[ "$(run run -- date +%s)" = 1451649600 ] || fail "timectl run -- date +%s did not print the frozen time"
[ "$(run run -- sh -c 'echo $LD_PRELOAD')" = "$prefix/lib/libTimeShim.so" ] || fail "the installed timectl did not preload $prefix/lib/libTimeShim.so"
# A program linked with musl gets the installed musl build.
printf '#include <stdio.h>\n#include <stdlib.h>\n#include <time.h>\nint main(void) { printf("%%lld %%s\\n", (long long)time(NULL), getenv("LD_PRELOAD")); return 0; }\n' > "$work/musl.c"
musl-gcc -o "$work/musl" "$work/musl.c" || fail "musl-gcc could not build a probe (install musl-tools)"
[ "$(run run -- "$work/musl")" = "1451649600 $prefix/lib/libTimeShim-musl.so" ] || fail "the installed timectl did not run a musl program on its musl build: $(run run -- "$work/musl" 2>&1)"
run session remove default
echo "test-install.sh: passed (man page, completions, timectl $version run attached, a glibc and a musl program)"
