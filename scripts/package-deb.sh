#!/usr/bin/env bash
# Builds the Debian package OUTDIR/timectl_VERSION-1_ARCH.deb from the
# release build (scripts/build.sh -c release; built here if missing):
#   /usr/bin/timectl                          static, finds the shim in ../lib/timectl
#   /usr/lib/timectl/libTimeShim.so
#   /usr/lib/timectl/timectl-static-loader     runs statically linked programs attached
#   /usr/share/man/man1/timectl.1.gz
#   /usr/share/bash-completion/completions/timectl
#   /usr/share/zsh/vendor-completions/_timectl
#   /usr/share/fish/vendor_completions.d/timectl.fish
#   /usr/share/doc/timectl/copyright, changelog.Debian.gz
#   /usr/share/lintian/overrides/timectl      (timectl is static on purpose)
# VERSION is what `timectl --version` prints (Sources/timectl/Version.swift);
# -1 is the packaging's revision.
#   scripts/package-deb.sh OUTDIR
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: scripts/package-deb.sh OUTDIR" >&2; exit 2; }
mkdir -p "$1"
outdir=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bin=$root/.build/release
if [ ! -x "$bin/timectl" ] || [ ! -f "$bin/libTimeShim.so" ] || [ ! -x "$bin/timectl-static-loader" ]; then scripts/build.sh -c release; fi
for tool in dpkg-deb dpkg objdump strip gzip; do
    command -v "$tool" >/dev/null || { echo "package-deb.sh: $tool is missing (Debian: apt-get install dpkg-dev binutils gzip)" >&2; exit 1; }
done

version=$("$bin/timectl" --version)-1
architecture=$(dpkg --print-architecture)
maintainer="timectl maintainers <timectl-maintainers@users.noreply.github.com>"
# Reproducible: every date in the package is the last commit's.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}

staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
package=$staging/root
generated=$staging/generated
scripts/generate-manual-and-completions.sh "$generated"

install -d -m 0755 "$package/DEBIAN" "$package/usr/bin" "$package/usr/lib/timectl" \
    "$package/usr/share/man/man1" "$package/usr/share/bash-completion/completions" \
    "$package/usr/share/zsh/vendor-completions" "$package/usr/share/fish/vendor_completions.d" \
    "$package/usr/share/doc/timectl" "$package/usr/share/lintian/overrides"
install -m 0755 "$bin/timectl" "$package/usr/bin/timectl"
install -m 0644 "$bin/libTimeShim.so" "$package/usr/lib/timectl/libTimeShim.so"
install -m 0755 "$bin/timectl-static-loader" "$package/usr/lib/timectl/timectl-static-loader"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$package/usr/bin/timectl" "$package/usr/lib/timectl/libTimeShim.so" \
    "$package/usr/lib/timectl/timectl-static-loader"
gzip -9n < "$generated/timectl.1" > "$package/usr/share/man/man1/timectl.1.gz"
install -m 0644 "$generated/timectl.bash" "$package/usr/share/bash-completion/completions/timectl"
install -m 0644 "$generated/_timectl" "$package/usr/share/zsh/vendor-completions/_timectl"
install -m 0644 "$generated/timectl.fish" "$package/usr/share/fish/vendor_completions.d/timectl.fish"

# Static on purpose: it starts in about 1 ms in front of every controlled
# command, and the shim can never be preloaded into it.
echo "timectl: statically-linked-binary [usr/bin/timectl]" > "$package/usr/share/lintian/overrides/timectl"
chmod 0644 "$package/usr/share/lintian/overrides/timectl"

# The repository states no license yet: the copyright file says so rather than invent one.
cat > "$package/usr/share/doc/timectl/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: timectl
Comment: The timectl repository does not state a license. Until it does,
 no license is granted beyond what the authors have agreed with you.

Files: *
Copyright: $(date -u -d "@$SOURCE_DATE_EPOCH" +%Y) the timectl authors
License: none-stated
 The timectl repository does not state a license.
COPYRIGHT
chmod 0644 "$package/usr/share/doc/timectl/copyright"
{
    echo "timectl ($version) unstable; urgency=medium"
    echo
    echo "  * Packaged from the timectl repository ($(git rev-parse --short HEAD 2>/dev/null || echo 'no git'))."
    echo
    echo " -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n > "$package/usr/share/doc/timectl/changelog.Debian.gz"
chmod 0644 "$package/usr/share/doc/timectl/changelog.Debian.gz"

# timectl is static; the shim needs libc only, at the newest symbol version it uses.
glibc=$(objdump -T "$package/usr/lib/timectl/libTimeShim.so" "$package/usr/lib/timectl/timectl-static-loader" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
cat > "$package/DEBIAN/control" <<CONTROL
Package: timectl
Version: $version
Architecture: $architecture
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$package" | cut -f1)
Depends: libc6 (>= $glibc)
Section: devel
Priority: optional
Description: control the passage of time for tests of unmodified programs
 timectl puts a whole process tree on a virtual timeline that a test
 controls: freeze it, move it, speed it up, step it, or let it skip every
 wait. A small preloaded library answers the clock reads, sleeps, waits
 and timers of every attached process from a shared memory segment that
 the timectl command changes.
CONTROL
(cd "$package" && find usr -type f -printf '%P\n' | sort | sed 's|^|usr/|' | xargs md5sum) > "$package/DEBIAN/md5sums"
chmod 0644 "$package/DEBIAN/control" "$package/DEBIAN/md5sums"
find "$package" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

deb=$outdir/timectl_${version}_${architecture}.deb
dpkg-deb --build --root-owner-group -Zxz "$package" "$deb" >/dev/null
echo "$deb"
