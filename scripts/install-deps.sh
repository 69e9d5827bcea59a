#!/usr/bin/env bash
# Installs the Debian packages the tests use; scripts/test.sh runs it first
# and .ci/run through it, so a fresh machine needs nothing installed by hand.
# With every package present it only checks (a second or two). As root it
# installs what is missing with apt-get; otherwise it prints the one command
# to run and exits 1 before any test starts.
#   scripts/install-deps.sh [--check]    (--check: report, never install)
set -euo pipefail

check_only=no
case "${1:-}" in
    "") ;;
    --check) check_only=yes ;;
    -h|--help) echo "usage: scripts/install-deps.sh [--check]"; exit 0 ;;
    *) echo "install-deps.sh: unknown argument '$1': expected --check or nothing" >&2; exit 2 ;;
esac

# What each is for:
#   binutils (readelf: the shim links libc only), gcc, g++ and libc6-dev (C and
#   C++ probes, libc.a for static programs), libasan8 libubsan1 libtsan2 (the
#   shim's C tests under sanitizers), make findutils coreutils git (scripts and
#   the throw-away dependent package), gdb (holding a writer stopped inside a
#   verb), man-db (the installed man page), lintian (the Debian package),
#   python3, default-jdk-headless, ruby, golang-go, rustc, erlang-base: real
#   runtimes the tests run unmodified on the session's time; libglib2.0-dev and
#   pkg-config: GLib's condition variables and queues, which wait with raw futex calls;
#   iputils-ping (a program given capabilities by its file; the kernel's packet
#   time stamps) and libcap2-bin (setcap, to give a test program capabilities);
#   dpkg-dev (dpkg-source, for apt-get source) and perl: libfaketime's own test
#   suite, fetched from Debian's registry (scripts/test-libfaketime-suite.sh);
#   musl-tools: musl-gcc, which builds the shim for musl programs and the musl
#   programs the tests run; gcc-aarch64-linux-gnu and libc6-dev-arm64-cross: the
#   aarch64 build of the shim and of the programs that qemu-user (qemu-user)
#   runs against the native timectl (scripts/test-shim-aarch64.sh, AArch64Tests).
packages=(
    binutils gcc g++ libc6-dev libasan8 libubsan1 libtsan2 make findutils coreutils git
    gdb man-db lintian python3 default-jdk-headless ruby golang-go rustc erlang-base
    libglib2.0-dev pkg-config iputils-ping libcap2-bin dpkg-dev perl
    musl-tools gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
)

missing_of() {
    local package
    for package in "$@"; do
        dpkg-query -W -f='${Status}\n' "$package" 2>/dev/null | grep -q '^install ok installed$' \
            || printf '%s\n' "$package"
    done
}

install() {
    [ $# -gt 0 ] || return 0
    if [ "$check_only" = yes ] || [ "$(id -u)" -ne 0 ]; then
        echo "install-deps.sh: the tests need Debian packages that are not installed: $*" >&2
        echo "install-deps.sh: run: sudo apt-get update && sudo apt-get install -y --no-install-recommends $*" >&2
        exit 1
    fi
    echo "install-deps.sh: installing $*"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

mapfile -t missing < <(missing_of "${packages[@]}")
install "${missing[@]}"

# CPython's own test package (Debian splits it off) for Debian's python3:
# test_time runs under timectl. Its name carries that python's version.
python_version=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
mapfile -t missing < <(missing_of "libpython$python_version-testsuite")
install "${missing[@]}"

# libfaketime's source comes from Debian's registry (apt-get source faketime),
# which needs a deb-src line: added to Debian's own sources, the archive they
# name already.
sources=/etc/apt/sources.list.d/debian.sources
if [ -f "$sources" ] && ! grep -q '^Types:.*deb-src' "$sources"; then
    if [ "$check_only" = yes ] || [ "$(id -u)" -ne 0 ]; then
        echo "install-deps.sh: libfaketime's test suite needs Debian's source packages: $sources has no deb-src" >&2
        echo "install-deps.sh: run: sudo sed -i 's/^Types: deb\$/Types: deb deb-src/' $sources && sudo apt-get update" >&2
        exit 1
    fi
    echo "install-deps.sh: adding deb-src to $sources"
    sed -i 's/^Types: deb$/Types: deb deb-src/' "$sources"
    apt-get update -qq
fi
