#!/usr/bin/env bash
# Runs the fuzz targets of Tests/Fuzz, each for SECONDS (default 10):
#   segment  the segment validator and what a consumer does with a segment
#            it accepted (libFuzzer via clang, ASan + UBSan)
#   trace    the trace reader: validation and event decoding (clang, ASan + UBSan)
#   formats  the DURATION / AT / RATE parsers and formatters (swiftc
#            -sanitize=fuzzer, ASan)
# Corpora start from a real segment, a real trace and sample texts, and
# are kept in .build/fuzz/corpus, so that longer runs build on shorter ones.
# Prints each target's runs and result; exits 1 if any target found a crash
# (its reproducer is left in .build/fuzz/).
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
seconds=${1:-10}
case "$seconds" in ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number (got '$seconds')" >&2; exit 2 ;; esac
shift || true
targets=${*:-segment trace formats}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
core=Sources/TimeShimC
out=.build/fuzz
mkdir -p "$out"
clang=$(command -v clang || true)
[ -n "$clang" ] || { echo "fuzz.sh: clang (with libFuzzer: the Swift toolchain's) not found" >&2; exit 1; }
cflags=(-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fuse-ld=lld -I "$core/include")

seed() {   # seed TARGET: a first corpus, made once
    local corpus=$out/corpus/$1
    [ -d "$corpus" ] && [ -n "$(ls -A "$corpus")" ] && return 0
    mkdir -p "$corpus"
    local bin work
    bin=$(swift build --show-bin-path)
    work=$(mktemp -d)
    case $1 in
    segment)
        TIMECTL_DIR=$work "$bin/timectl" freeze 2016-01-01T12:00:00Z >/dev/null
        # The mode byte (0: as is, 1: checks recomputed), then the segment's first 2 KiB.
        { printf '\0'; head -c 2048 "$work/default.seg"; } > "$corpus/frozen"
        { printf '\1'; head -c 2048 "$work/default.seg"; } > "$corpus/frozen-rechecked"
        ;;
    trace)
        TIMECTL_DIR=$work "$bin/timectl" record --trace "$work/t.trace" -- sh -c 'date; sleep 0.01; date' >/dev/null 2>&1
        cp "$work/t.trace" "$corpus/date"
        ;;
    formats)
        for text in 1h30m 250ms 1.5 -3s 2016-01-01T12:00:00Z 2016-01-01T12:00:00+02:00 2016-01-01 \
                    '2016-01-01 12:00:00' 12:00 T12:00:30.5+02:00 @1451649600.25 +1d 0.5 1000000; do
            printf '%s' "$text" > "$corpus/$(printf '%s' "$text" | cksum | cut -d' ' -f1)"
        done
        ;;
    esac
    rm -rf "$work"
}

build() {
    case $1 in
    segment) "$clang" "${cflags[@]}" Tests/Fuzz/fuzz_segment.c $core/core/segment_*.c $core/core/procfs.c $core/core/realclock.c $core/core/vdso_image.c -o "$out/fuzz_segment" ;;
    trace) "$clang" "${cflags[@]}" Tests/Fuzz/fuzz_trace.c $core/core/trace.c -o "$out/fuzz_trace" ;;
    formats)
        mkdir -p "$out/modules"
        printf 'module TimeShimC {\n    umbrella header "%s/%s/include/TimeShimC.h"\n    export *\n}\n' "$root" "$core" \
            > "$out/modules/module.modulemap"
        swiftc -sanitize=fuzzer,address -parse-as-library -O -Xcc -fmodule-map-file="$out/modules/module.modulemap" \
            -I "$core/include" Tests/Fuzz/fuzz_formats.swift Sources/TimeControlKit/Session/TimeFormats.swift -o "$out/fuzz_formats"
        ;;
    *) echo "fuzz.sh: unknown target '$1' (accepted: segment, trace, formats)" >&2; exit 2 ;;
    esac 2> >(grep -v "Cannot export local symbol" >&2)
}

failed=0
for target in $targets; do
    build "$target"
    seed "$target"
    log=$out/$target.log
    if (cd "$out" && "./fuzz_$target" -max_total_time="$seconds" -print_final_stats=1 "corpus/$target" >"$target.log" 2>&1); then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        echo "fuzz $target: ${runs:-?} runs in ${seconds}s, no crash"
    else
        failed=1
        echo "fuzz $target: FAILED, see $log and the crash-* reproducer in $out:"
        grep -E "ERROR|runtime error|Fatal error|SUMMARY|deadly signal" "$log" | head -5
    fi
done
exit $failed
