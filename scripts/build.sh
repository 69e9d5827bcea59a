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
if [ "$configuration" = release ]; then
    swift build -c release --product timectl -Xswiftc -static-executable
else
    swift build -c debug
fi
bin=$(swift build -c "$configuration" --show-bin-path)
scripts/build-shim.sh "$bin/libTimeShim.so"
echo "built $bin/timectl and $bin/libTimeShim.so"
