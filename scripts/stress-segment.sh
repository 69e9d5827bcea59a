#!/usr/bin/env bash
# Stresses the segment from outside and prints its figures
# (docs/performance.md, "The segment under stress, damage and fuzzing"):
#   torn reads    readers (clock_hammer, frozen-ticks mode) in 2 processes
#                 while whole-second ticks land: a torn read shows as a fraction
#   regressions   readers (clock_hammer, running mode) in 2 processes while
#                 random freezes, rates, ticks and resets land
#   ticks lost    3 rounds of TICKS concurrent `timectl tick 1`: the clock must
#                 move exactly TICKS s each round
#   killed        KILLS writers SIGKILLed at random moments inside a loop of
#                 verbs; after each, the next verb must take the lock
#   stopped       a writer looping verbs SIGSTOPped 1.5 s at random moments,
#                 and one held by gdb inside the publishing functions (if gdb
#                 is installed): the longest gap between two reads of a
#                 reader in another process, in real and in CPU time
# Exits 1 if any figure is not what SPEC §2 and §7 promise.
#   scripts/stress-segment.sh [--seconds S] [--ticks N] [--kills N] [--stops N] [--no-build]
set -euo pipefail
seconds=20 ticks=300 kills=200 stops=4 build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds=$2; shift 2 ;;
        --ticks) ticks=$2; shift 2 ;;
        --kills) kills=$2; shift 2 ;;
        --stops) stops=$2; shift 2 ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "stress-segment.sh: unknown argument '$1' (accepted: --seconds S, --ticks N, --kills N, --stops N, --no-build)" >&2; exit 2 ;;
    esac
done
for value in "$seconds" "$ticks" "$kills" "$stops"; do
    case "$value" in ''|*[!0-9]*) echo "stress-segment.sh: counts and seconds are whole numbers (got '$value')" >&2; exit 2 ;; esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ "$build" = 1 ] && scripts/build.sh >/dev/null
bin=$(swift build --show-bin-path)
timectl=$bin/timectl
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
export TIMECTL_DIR=$work/sessions
core=Sources/TimeShimC
cc -O2 -o "$work/clock_hammer" Tests/Fixtures/clock_hammer.c
cc -O2 -I $core/include -o "$work/gap_reader" Tests/Fixtures/gap_reader.c $core/core/realclock.c $core/core/vdso_image.c
cc -g -O0 -I $core/include -o "$work/writer" Tests/Fixtures/dead_writer.c $core/core/realclock.c $core/core/vdso_image.c $core/core/segment_*.c $core/core/procfs.c -lpthread
ok=1
figure() { printf '%-34s %s\n' "$1" "$2"; }
sum() { awk -v key="$1" '{ for (i = 1; i < NF; i++) if ($i == key) total += $(i + 1) } END { printf "%.0f\n", total }'; }

# ---- torn reads: whole-second ticks against two frozen-ticks readers ----
"$timectl" --session torn freeze 2016-01-01T12:00:00Z
for reader in 1 2; do
    "$timectl" --session torn run -- "$work/clock_hammer" frozen-ticks 1000000000 "$seconds" > "$work/torn.$reader" 2>&1 & pids+=($!)
done
readers=("${pids[@]}")
verbs=0
while kill -0 "${readers[0]}" 2>/dev/null || kill -0 "${readers[1]}" 2>/dev/null; do
    "$work/writer" "$TIMECTL_DIR/torn.seg" verbs 0 >/dev/null   # opens, checks, closes
    "$timectl" --session torn tick -q 1; verbs=$((verbs + 1))
done
wait "${readers[@]}" || true
reads=$(cat "$work"/torn.? | sum reads)
torn=$(cat "$work"/torn.? | sum violations)
figure "torn reads" "$torn in $reads reads across 2 processes, $verbs ticks"
[ "$torn" = 0 ] || ok=0

# ---- monotonic regressions under random verbs ----
"$timectl" --session random freeze; "$timectl" --session random resume
pids=()
for reader in 1 2; do
    "$timectl" --session random run -- "$work/clock_hammer" running 1000000000 "$seconds" > "$work/random.$reader" 2>&1 & pids+=($!)
done
readers=("${pids[@]}")
verbs=0
choices=(freeze "rate 3" "rate 0.5" "tick 0.25" "set -1h" reset resume)
while kill -0 "${readers[0]}" 2>/dev/null || kill -0 "${readers[1]}" 2>/dev/null; do
    # shellcheck disable=SC2086
    "$timectl" --session random ${choices[RANDOM % ${#choices[@]}]} >/dev/null; verbs=$((verbs + 1))
done
wait "${readers[@]}" || true
reads=$(cat "$work"/random.? | sum reads)
regressions=$(cat "$work"/random.? | sum violations)
figure "monotonic regressions" "$regressions in $reads reads across 2 processes, $verbs random verbs"
[ "$regressions" = 0 ] || ok=0

# ---- lost ticks ----
lost=0
for round in 1 2 3; do
    "$timectl" --session ticks freeze @1000000000
    seq "$ticks" | xargs -P 16 -I{} "$timectl" --session ticks tick -q 1
    moved=$(( $("$timectl" --session ticks run -- date +%s) - 1000000000 ))
    lost=$((lost + ticks - moved))
    "$timectl" --session ticks freeze @1000000000 >/dev/null
done
figure "ticks lost" "$lost of 3 x $ticks concurrent ticks"
[ "$lost" = 0 ] || ok=0

# ---- killed writers ----
"$timectl" --session killed freeze @1000000000
recovered=0
for n in $(seq "$kills"); do
    "$work/writer" "$TIMECTL_DIR/killed.seg" verbs 100000000 >/dev/null & writer=$!
    sleep "0.00$((RANDOM % 10))$((RANDOM % 10))"
    kill -KILL "$writer"; wait "$writer" 2>/dev/null || true
    if timeout 5 "$timectl" --session killed tick 1 >/dev/null && timeout 5 "$timectl" --session killed run -- true; then
        recovered=$((recovered + 1))
    fi
done
figure "writers killed mid-verb" "$kills, recovered $recovered"
[ "$recovered" = "$kills" ] || ok=0

# ---- stopped writers ----
"$timectl" --session stopped freeze; "$timectl" --session stopped resume
"$timectl" --session stopped run -- "$work/gap_reader" $((stops * 2 + 4)) > "$work/gap" & reader=$!
sleep 1
"$work/writer" "$TIMECTL_DIR/stopped.seg" verbs 1000000000 >/dev/null & writer=$!
for n in $(seq "$stops"); do
    sleep "0.$((RANDOM % 10))"
    kill -STOP "$writer"; sleep 1.5; kill -CONT "$writer"
done
kill -KILL "$writer"; wait "$writer" 2>/dev/null || true
wait "$reader"
gaps() { echo "$(sum max_gap_ms < "$work/gap") ms longest, $(sum max_cpu_gap_ms < "$work/gap") ms of CPU time"; }
# A held reader spins through a whole 1.5 s stop: its CPU-time gap shows it even when
# the real gap is blurred by a loaded machine.
gaps_ok() { awk '/^max_gap_ms/ { if ($2 >= 1000) bad = 1 } /^max_cpu_gap_ms/ { if ($2 >= 200) bad = 1 }
                 /^regressions/ { if ($2 != 0) bad = 1 } END { exit bad }' "$work/gap"; }
figure "reader gap, writer SIGSTOPped" "$(gaps) ($stops stops of 1.5 s; $(sum reads < "$work/gap") reads, $(sum regressions < "$work/gap") regressions)"
gaps_ok || ok=0
if command -v gdb >/dev/null; then
    "$timectl" --session stopped run -- "$work/gap_reader" 12 > "$work/gap" & reader=$!
    sleep 1
    gdb -q -nx -batch -x Tests/Fixtures/stop_writer.gdb --args "$work/writer" "$TIMECTL_DIR/stopped.seg" verbs 1 > "$work/gdb" 2>&1
    stops_made=$(grep -c '^Breakpoint [0-9],' "$work/gdb" || true)
    wait "$reader"
    figure "reader gap, writer held by gdb" "$(gaps) ($stops_made stops inside publish, each held 2 x 1.5 s)"
    gaps_ok || ok=0
    [ "$stops_made" -ge 3 ] || ok=0
fi
[ "$ok" = 1 ] && echo "stress-segment: all figures as promised" || { echo "stress-segment: FAILED"; exit 1; }
