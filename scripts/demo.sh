#!/usr/bin/env bash
# The main job: freeze a real program's clock, tick it, and show the result.
# Uses the release build (scripts/build.sh -c release) and a private session
# directory, so it never touches your own sessions.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/.build/release
if [ ! -x "$bin/timectl" ] || [ ! -f "$bin/libTimeShim.so" ]; then
    echo "demo.sh: no release build in $bin; run scripts/build.sh -c release first" >&2
    exit 1
fi
export TIMECTL_DIR
TIMECTL_DIR=$(mktemp -d)
trap 'rm -rf "$TIMECTL_DIR"' EXIT
export PATH="$bin:$PATH"

# Shows a command as one would type it, then runs it. A word with anything
# a shell would act on is shown in single quotes (printf %q's backslashes,
# 'import\ time\,\ ...', are correct but unreadable), so that the line can
# be copied and pasted as it is.
shown() {
    local word
    for word in "$@"; do
        if [[ $word =~ ^[A-Za-z0-9_./:=+%@,-]+$ ]]; then
            printf ' %s' "$word"
        else
            printf " '%s'" "${word//\'/\'\\\'\'}"
        fi
    done
}
step() { printf '\n$%s\n' "$(shown "$@")"; "$@"; }

echo "timectl demo: unmodified programs on a virtual clock (sessions in $TIMECTL_DIR)"
step timectl freeze 2016-01-01T12:00:00Z
step timectl run -- date -u
echo "(2 real seconds pass)"
sleep 2
step timectl run -- date -u
step timectl tick 3
step timectl run -- date -u +%s
step timectl run -- python3 -c 'import time, datetime; print(datetime.datetime.now(datetime.timezone.utc), "monotonic", time.monotonic())'
step timectl set +1d
step timectl run -- python3 -c 'import time, datetime; print(datetime.datetime.now(datetime.timezone.utc), "monotonic", time.monotonic())'
echo "(the wall clock moved a day; the monotonic clock did not)"
step timectl rate 100
echo "(0.5 real seconds pass at 100x)"
sleep 0.5
step timectl run -- date -u
step timectl status
