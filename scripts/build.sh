#!/usr/bin/env bash
# Builds everything: the Swift package (timectl, TimeControlKit) and the
# preload shim, which lands next to timectl in the same bin directory.
#   scripts/build.sh [-c debug|release]     (default: debug)
# Release builds link timectl fully statically (-static-executable): it
# runs in front of every controlled command, and a static binary starts as
# fast as a C program (about 1 ms here, against 2.4 ms with only the Swift
# standard library static). A static timectl also can never have the shim
# preloaded into itself.
set -euo pipefail

usage() { echo "usage: scripts/build.sh [-c debug|release]"; }
configuration=debug
while [ $# -gt 0 ]; do
    case "$1" in
        -c|--configuration)
            [ $# -ge 2 ] || { echo "build.sh: $1 needs a value: debug or release" >&2; exit 2; }
            configuration=$2; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "build.sh: unknown argument '$1'; $(usage)" >&2; exit 2 ;;
    esac
done
case "$configuration" in
    debug|release) ;;
    *) echo "build.sh: unknown configuration '$configuration': expected debug or release" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/.."
source scripts/swift-tmpdir.sh
[ -z "$swift_private_tmpdir" ] || trap 'rm -rf "$swift_private_tmpdir"' EXIT

# A fully static link draws eight warnings from glibc's libc.a: seven (getpwuid
# twice) for symbols that glibc serves only through shared libraries loaded at
# run time, and one for mktemp:
#   getpwuid      our own ShimBuild.cacheDirectory, only when neither
#                 XDG_CACHE_HOME nor HOME is set, and only when building the
#                 shim from its sources (never for this timectl, which has
#                 libTimeShim.so beside it) or making a link to a shim whose
#                 path LD_PRELOAD cannot carry (ShimLink.swift, which then
#                 uses the session directory); a failed lookup is reported
#                 ("set XDG_CACHE_HOME or HOME"). The linker names the place
#                 by its source line, or, in the copy specialised for
#                 ShimLink's call, by its object file and symbol
#   getpwuid_r, getpwnam_r, getgrgid_r, getgrnam_r
#                 Foundation's user and group lookups (home directories, ~user
#                 paths, owner and group names of file attributes), which
#                 timectl never asks for
#   dlopen        the Swift runtime's prespecializations library, opened only
#                 when SWIFT_DEBUG_LIB_PRESPECIALIZED_PATH is set (with
#                 RTLD_NOLOAD: in a static program it fails, and the runtime
#                 goes on without it)
#   mktemp        Foundation's atomic write (replay --report FILE): it opens
#                 the name with O_CREAT|O_EXCL and retries, as mkstemp does
# The user and group lookups go through NSS, which a static program does by
# loading the machine's libnss_*.so: where that glibc is not the one linked,
# a lookup may fail (or worse); none is made in timectl's use, the only one
# reachable at all being ShimBuild's, whose failure it reports. No linker option silences
# these warnings alone (ld's --no-warnings silences every warning), so exactly
# these lines, from exactly these places, are left out of the output; any
# other warning, from the linker or the compiler, is shown as it comes.
static_link_note='in statically linked applications requires at runtime the shared libraries from the glibc version used for linking$'
known_static_link_warnings=(
    "^/[^ ]*/Sources/TimeControlKit/Shim/ShimBuild\.swift:[0-9]+: warning: Using 'getpwuid' $static_link_note"
    "^/[^ ]*/TimeControlKit\.build/ShimBuild\.swift\.o:[^ ]*:function [^ ]*ShimBuild[^ ]*cacheDirectory[^ ]*: warning: Using 'getpwuid' $static_link_note"
    "^/[^ ]*/libswiftCore\.a\(LibPrespecialized\.cpp\.o\):.*: warning: Using 'dlopen' $static_link_note"
    "^/[^ ]*/libFoundationEssentials\.a\([^ )]*\.swift\.o\):.*: warning: Using '(getpwuid_r|getpwnam_r|getgrgid_r|getgrnam_r)' $static_link_note"
    "^/[^ ]*/libFoundationEssentials\.a\(Data\+Writing\.swift\.o\):.*: warning: the use of .mktemp' is dangerous, better use .mkstemp' or .mkdtemp'$"
)
without_known_static_link_warnings() {
    local line pattern left_out=0
    while IFS= read -r line; do
        for pattern in "${known_static_link_warnings[@]}"; do
            [[ $line =~ $pattern ]] && { left_out=$((left_out + 1)); continue 2; }
        done
        printf '%s\n' "$line"
    done
    if [ "$left_out" -gt 0 ]; then
        echo "build.sh: left out $left_out known glibc warnings about static linking (getpwuid, dlopen, mktemp...: why they are harmless is in scripts/build.sh)"
    fi
}

if [ "$configuration" = release ]; then
    swift build -c release --product timectl -Xswiftc -static-executable | without_known_static_link_warnings
else
    swift build -c debug
fi
bin=$(swift build -c "$configuration" --show-bin-path)
scripts/build-shim.sh "$bin/libTimeShim.so"
# The build for musl programs (Alpine's), beside it; without musl-gcc such programs are refused with one line.
if command -v musl-gcc >/dev/null; then
    scripts/build-shim-musl.sh "$bin/libTimeShim-musl.so"
    echo "built $bin/timectl, $bin/libTimeShim.so and $bin/libTimeShim-musl.so"
else
    rm -f "$bin/libTimeShim-musl.so"
    echo "built $bin/timectl and $bin/libTimeShim.so (no musl-gcc: musl programs will be refused; install musl-tools to build libTimeShim-musl.so)"
fi
