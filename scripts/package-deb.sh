#!/usr/bin/env bash
# Builds the Debian package OUTDIR/timectl_VERSION-1_ARCH.deb from the
# release build (scripts/build.sh -c release; built here if missing):
#   /usr/bin/timectl                          static, finds the shim in ../lib/timectl
#   /usr/lib/timectl/libTimeShim.so
#   /usr/lib/timectl/libTimeShim-musl.so       the shim for programs linked with musl (musl-gcc builds it)
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
# The package serves musl programs too: their build of the shim is not optional here.
if [ ! -f "$bin/libTimeShim-musl.so" ]; then
    command -v musl-gcc >/dev/null || { echo "package-deb.sh: musl-gcc is missing, which builds libTimeShim-musl.so (Debian: apt-get install musl-tools)" >&2; exit 1; }
    scripts/build-shim-musl.sh "$bin/libTimeShim-musl.so"
fi
for tool in dpkg-deb dpkg objdump strip gzip; do
    command -v "$tool" >/dev/null || { echo "package-deb.sh: $tool is missing (Debian: apt-get install dpkg-dev binutils gzip)" >&2; exit 1; }
done

version=$("$bin/timectl" --version)-1
architecture=$(dpkg --print-architecture)
# The project has no mail address of its own, and no package archive: the
# default Maintainer says so plainly, with a domain reserved for names that
# cannot exist (RFC 2606's .invalid), rather than look like a real mailbox.
# Whoever publishes a package puts their own name and address here, through
# the variables Debian's tools read (dch, debmake).
maintainer="${DEBFULLNAME:-The timectl authors} <${DEBEMAIL:-authors@timectl.invalid}>"
# The copyright line is LICENSE's first line, kept in one place.
copyright=$(sed -n '1s/^Copyright //p' "$root/LICENSE")
[ -n "$copyright" ] || { echo "package-deb.sh: LICENSE does not start with a 'Copyright YEAR HOLDER' line" >&2; exit 1; }
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
install -m 0644 "$bin/libTimeShim-musl.so" "$package/usr/lib/timectl/libTimeShim-musl.so"
install -m 0755 "$bin/timectl-static-loader" "$package/usr/lib/timectl/timectl-static-loader"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$package/usr/bin/timectl" "$package/usr/lib/timectl/libTimeShim.so" \
    "$package/usr/lib/timectl/libTimeShim-musl.so" "$package/usr/lib/timectl/timectl-static-loader"
gzip -9n < "$generated/timectl.1" > "$package/usr/share/man/man1/timectl.1.gz"
install -m 0644 "$generated/timectl.bash" "$package/usr/share/bash-completion/completions/timectl"
install -m 0644 "$generated/_timectl" "$package/usr/share/zsh/vendor-completions/_timectl"
install -m 0644 "$generated/timectl.fish" "$package/usr/share/fish/vendor_completions.d/timectl.fish"

# Static on purpose: it starts in about 1 ms in front of every controlled
# command, and the shim can never be preloaded into it. The musl build of
# the shim needs musl's libc.so (musl programs bring it), never glibc's.
{
    echo "timectl: statically-linked-binary [usr/bin/timectl]"
    echo "# For programs linked with musl: it needs musl's libc.so, which they bring, not glibc's."
    echo "timectl: library-not-linked-against-libc [usr/lib/timectl/libTimeShim-musl.so]"
} > "$package/usr/share/lintian/overrides/timectl"
chmod 0644 "$package/usr/share/lintian/overrides/timectl"

# Machine-readable (DEP-5), pointing at Debian's copy of the licence text.
cat > "$package/usr/share/doc/timectl/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: timectl
Comment: usr/bin/timectl is linked statically: it also holds the Swift
 runtime and libraries it was built with, swift-argument-parser,
 swift-system and the GNU C Library, each under its own licence.

Files: *
Copyright: $copyright
License: Apache-2.0

License: Apache-2.0
 Licensed under the Apache License, Version 2.0 (the "License");
 you may not use this file except in compliance with the License.
 You may obtain a copy of the License at
 .
 https://www.apache.org/licenses/LICENSE-2.0
 .
 Unless required by applicable law or agreed to in writing, software
 distributed under the License is distributed on an "AS IS" BASIS,
 WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 See the License for the specific language governing permissions and
 limitations under the License.
 .
 On Debian systems, the complete text of the Apache License, Version 2.0
 can be found in "/usr/share/common-licenses/Apache-2.0".
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
