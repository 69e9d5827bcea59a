#!/usr/bin/env bash
# Installs the release build: PREFIX/bin/timectl and PREFIX/lib/libTimeShim.so
# (timectl finds the shim in ../lib relative to itself).
#   scripts/install.sh [--prefix DIR]      (default /usr/local; builds if needed)
set -euo pipefail
prefix=/usr/local
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix)
            [ $# -ge 2 ] || { echo "install.sh: --prefix needs a directory" >&2; exit 2; }
            prefix=$2; shift 2 ;;
        -h|--help) echo "usage: scripts/install.sh [--prefix DIR]"; exit 0 ;;
        *) echo "install.sh: unknown argument '$1' (accepted: --prefix DIR)" >&2; exit 2 ;;
    esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.build/release
if [ ! -x "$bin/timectl" ] || [ ! -f "$bin/libTimeShim.so" ]; then "$root/scripts/build.sh" -c release; fi
install -d "$prefix/bin" "$prefix/lib"
install -m 0755 "$bin/timectl" "$prefix/bin/timectl"
install -m 0644 "$bin/libTimeShim.so" "$prefix/lib/libTimeShim.so"
echo "installed $prefix/bin/timectl and $prefix/lib/libTimeShim.so"
