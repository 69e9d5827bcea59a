#!/usr/bin/env bash
# Installs the release build like a Unix tool:
#   PREFIX/bin/timectl, PREFIX/lib/libTimeShim.so (timectl finds the shim in
#   ../lib relative to itself), PREFIX/lib/libTimeShim-musl.so beside it (for
#   programs linked with musl; built when musl-gcc is installed) and
#   PREFIX/lib/timectl-static-loader (it runs statically linked programs
#   attached), the man page PREFIX/share/man/man1/timectl.1,
#   and completions in PREFIX/share/bash-completion/completions/timectl,
#   PREFIX/share/zsh/site-functions/_timectl and
#   PREFIX/share/fish/vendor_completions.d/timectl.fish.
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
if [ ! -x "$bin/timectl" ] || [ ! -f "$bin/libTimeShim.so" ] || [ ! -x "$bin/timectl-static-loader" ]; then "$root/scripts/build.sh" -c release; fi
if [ ! -f "$bin/libTimeShim-musl.so" ] && command -v musl-gcc >/dev/null; then "$root/scripts/build-shim-musl.sh" "$bin/libTimeShim-musl.so"; fi
generated=$(mktemp -d)
trap 'rm -rf "$generated"' EXIT
"$root/scripts/generate-manual-and-completions.sh" "$generated"
install -d "$prefix/bin" "$prefix/lib" "$prefix/share/man/man1" "$prefix/share/bash-completion/completions" \
    "$prefix/share/zsh/site-functions" "$prefix/share/fish/vendor_completions.d"
install -m 0755 "$bin/timectl" "$prefix/bin/timectl"
install -m 0644 "$bin/libTimeShim.so" "$prefix/lib/libTimeShim.so"
install -m 0755 "$bin/timectl-static-loader" "$prefix/lib/timectl-static-loader"
musl="and no libTimeShim-musl.so (no musl-gcc: musl programs will be refused)"
if [ -f "$bin/libTimeShim-musl.so" ]; then
    install -m 0644 "$bin/libTimeShim-musl.so" "$prefix/lib/libTimeShim-musl.so"
    musl="$prefix/lib/libTimeShim-musl.so"
else
    rm -f "$prefix/lib/libTimeShim-musl.so"  # an older one would not match this shim's segment layout
fi
install -m 0644 "$generated/timectl.1" "$prefix/share/man/man1/timectl.1"
install -m 0644 "$generated/timectl.bash" "$prefix/share/bash-completion/completions/timectl"
install -m 0644 "$generated/_timectl" "$prefix/share/zsh/site-functions/_timectl"
install -m 0644 "$generated/timectl.fish" "$prefix/share/fish/vendor_completions.d/timectl.fish"
echo "installed $prefix/bin/timectl, $prefix/lib/libTimeShim.so, $prefix/lib/timectl-static-loader, $musl, the man page and bash, zsh and fish completions"
