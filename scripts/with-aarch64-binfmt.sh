#!/usr/bin/env bash
# Runs COMMAND where an exec of an aarch64 program runs it under qemu-user,
# as binfmt_misc does on machines set up for it: in a user and mount
# namespace of its own, with a private binfmt_misc instance (Linux 6.7 and
# later give each user namespace one; nothing of the host's changes) that
# hands aarch64 ELF programs to Tests/Fixtures/qemu_guest_preload.c (built
# here, static), which runs qemu-aarch64 with the guest's LD_PRELOAD. The
# tests need it where an aarch64 program execs another (fork/exec, the
# shim's C tests re-running themselves); a guest started directly is simply
# `qemu-aarch64 -L PREFIX -E LD_PRELOAD=… PROGRAM`. Processes keep their
# pids (no pid namespace), so a native timectl sees them as usual.
#   scripts/with-aarch64-binfmt.sh COMMAND [ARGUMENT...]
#   ($QEMU_LD_PREFIX, default /usr/aarch64-linux-gnu: the guest's libraries)
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: scripts/with-aarch64-binfmt.sh COMMAND [ARGUMENT...]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
command -v qemu-aarch64 >/dev/null || { echo "with-aarch64-binfmt.sh: qemu-aarch64 is missing (apt-get install qemu-user)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -static -O1 -Wall -Werror -o "$work/qemu_guest_preload" "$root/Tests/Fixtures/qemu_guest_preload.c"
export QEMU_LD_PREFIX=${QEMU_LD_PREFIX:-/usr/aarch64-linux-gnu}
export QEMU=$(command -v qemu-aarch64)
# ELF64, little-endian, version 1, ET_EXEC or ET_DYN (the mask's 0xfe), EM_AARCH64 (0xb7). F: the interpreter is
# opened now, so the kernel keeps it whatever happens to the file.
magic='\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
# The namespace's own root (the caller's uid mapped to 0) may mount binfmt_misc and register.
unshare --user --map-root-user --mount bash -c '
    set -e
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>"$0/mount.err" || {
        echo "with-aarch64-binfmt.sh: cannot mount a private binfmt_misc ($(cat "$0/mount.err")): it needs Linux 6.7 or later" >&2
        exit 1
    }
    printf ":qemu-aarch64:M::%s:%s:%s:F" "$1" "$2" "$0/qemu_guest_preload" > /proc/sys/fs/binfmt_misc/register
    shift 2
    "$@"
' "$work" "$magic" "$mask" "$@"
