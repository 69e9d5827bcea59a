#!/usr/bin/env bash
# Builds the Debian package into a temporary directory (scripts/package-deb.sh)
# and checks it: exactly one .deb, named for timectl's version; `dpkg-deb -I`
# names package timectl for this architecture; the binary, the shim, the man
# page and the completions are in it; its copyright file names Apache-2.0;
# lintian finds no error; and a copy unpacked anywhere (`dpkg-deb -x`) runs
# a command attached, with the shim found relative to timectl, and a program
# linked with musl on the packaged musl build.
#   scripts/test-package-deb.sh      (builds the release build if missing)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "test-package-deb.sh: FAILED: $*" >&2; exit 1; }
"$root/scripts/package-deb.sh" "$work/out" >/dev/null
debs=("$work"/out/*)
[ ${#debs[@]} -eq 1 ] || fail "expected one file in OUTDIR, found: ${debs[*]}"
deb=${debs[0]}
upstream=$(sed -n 's/.*timectlVersion = "\(.*\)".*/\1/p' "$root/Sources/timectl/Version.swift")
version=$upstream-1
architecture=$(dpkg --print-architecture)
[ "$(basename "$deb")" = "timectl_${version}_${architecture}.deb" ] || fail "unexpected name $(basename "$deb")"

info=$(dpkg-deb -I "$deb")
grep -q "^ Package: timectl$" <<<"$info" || fail "dpkg-deb -I does not name package timectl: $info"
grep -q "^ Architecture: $architecture$" <<<"$info" || fail "dpkg-deb -I does not name architecture $architecture: $info"
grep -q "^ Version: $version$" <<<"$info" || fail "dpkg-deb -I does not name version $version: $info"

contents=$(dpkg-deb -c "$deb")
for path in ./usr/bin/timectl ./usr/lib/timectl/libTimeShim.so ./usr/lib/timectl/libTimeShim-musl.so ./usr/lib/timectl/timectl-static-loader ./usr/share/man/man1/timectl.1.gz \
            ./usr/share/bash-completion/completions/timectl ./usr/share/zsh/vendor-completions/_timectl \
            ./usr/share/fish/vendor_completions.d/timectl.fish ./usr/share/doc/timectl/copyright \
            ./usr/share/doc/timectl/changelog.Debian.gz; do
    grep -q " $path$" <<<"$contents" || fail "$path is not in the package"
done
awk 'NF && $2 != "root/root" { found = 1 } END { exit !found }' <<<"$contents" && fail "files not owned by root: $contents"

if command -v lintian >/dev/null; then
    lintian --fail-on error --tag-display-limit 0 "$deb" > "$work/lintian.txt" 2>&1 || fail "lintian: $(cat "$work/lintian.txt")"
    grep -q '^E:' "$work/lintian.txt" && fail "lintian: $(cat "$work/lintian.txt")"
else
    echo "test-package-deb.sh: lintian is not installed (apt-get install lintian): not checked" >&2
fi

# Unpacked into a directory of its own, the package's timectl works there.
dpkg-deb -x "$deb" "$work/unpacked"
copyright=$work/unpacked/usr/share/doc/timectl/copyright
grep -qx "License: Apache-2.0" "$copyright" && grep -q '/usr/share/common-licenses/Apache-2.0' "$copyright" \
    || fail "the copyright file does not name Apache-2.0 and Debian's copy of it: $(cat "$copyright")"
timectl=$work/unpacked/usr/bin/timectl
mkdir -m 0700 "$work/sessions"
run() { env -u TIMECTL_SHIM -u LD_PRELOAD -u TIMECTL_SEGMENT -u TIMECTL_SESSION TIMECTL_DIR="$work/sessions" "$timectl" "$@"; }
[ "$(run --version)" = "$upstream" ] || fail "the packaged timectl --version is not $upstream"
run freeze @1451649600
[ "$(run run -- date +%s)" = 1451649600 ] || fail "the unpacked timectl did not run date +%s on the frozen session"
[ "$(run run -- sh -c 'echo $LD_PRELOAD')" = "$work/unpacked/usr/lib/timectl/libTimeShim.so" ] \
    || fail "the unpacked timectl did not preload its own shim"
printf '#include <stdio.h>\n#include <stdlib.h>\n#include <time.h>\nint main(void) { printf("%%lld %%s\\n", (long long)time(NULL), getenv("LD_PRELOAD")); return 0; }\n' > "$work/musl.c"
musl-gcc -o "$work/musl" "$work/musl.c" || fail "musl-gcc could not build a probe (install musl-tools)"
[ "$(run run -- "$work/musl")" = "1451649600 $work/unpacked/usr/lib/timectl/libTimeShim-musl.so" ] \
    || fail "the unpacked timectl did not run a musl program on its musl build: $(run run -- "$work/musl" 2>&1)"
run session remove default
man -l "$work/unpacked/usr/share/man/man1/timectl.1.gz" > /dev/null 2>"$work/man.err" && [ ! -s "$work/man.err" ] \
    || fail "man -l of the packaged page: $(cat "$work/man.err")"
echo "test-package-deb.sh: passed ($(basename "$deb"), $(sed -n 's/^W: //p' "$work/lintian.txt" 2>/dev/null | wc -l) lintian warnings)"
