/*
 * libFuzzer target: the segment validator, and everything a consumer does
 * with a segment it accepted. The input is a segment's first bytes (the
 * rest of a full-size segment is zero); if its first byte is odd the
 * harness recomputes the header and state checks, so the fuzzer also
 * explores the invariants behind them. An accepted segment must read in
 * range on every clock, snapshot, and take a verb or refuse it cleanly.
 * Built and run by scripts/fuzz.sh.
 */
#define _GNU_SOURCE
#include "timectl_segment_io.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct tc_segment *segment;
static uint64_t size;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t length) {
    if (!segment) {
        tc_realclock_init();
        size = tc_segment_expected_size();
        segment = aligned_alloc(4096, size);
    }
    if (length < 1) return 0;
    int fix_checks = data[0] & 1;
    data++;
    length--;
    memset(segment, 0, size);
    memcpy(segment, data, length < size ? length : size);
    if (fix_checks) {
        segment->header.check = tc_header_check(&segment->header);
        for (int copy = 0; copy < 2; copy++)
            segment->timeline.copy[copy].check =
                tc_state_check(&segment->timeline.copy[copy].state, &segment->timeline.pending[copy]);
    }
    if (tc_segment_validate(segment, size, (uint32_t)geteuid()) != TC_OK) return 0;

    for (int clock = 0; clock < TC_VCLOCK_COUNT; clock++) {
        struct timespec value;
        tc_segment_read_into(segment, clock, &value);
        if (value.tv_nsec < 0 || value.tv_nsec >= 1000000000) abort();
    }
    struct tc_clock_state state;
    tc_segment_snapshot(segment, &state);
    if (tc_segment_rate(segment) & TC_RATE_PENDING) abort();
    struct tc_wait_slot waits[16];
    uint32_t slots[16];
    tc_wait_collect(segment, waits, slots, 16);
    struct tc_proc_slot procs[16];
    tc_proc_collect(segment, procs, 16);

    struct tc_verb verb = {.kind = TC_VERB_ADVANCE, .value = 1000000000};
    struct tc_failure failure = {0};
    if (tc_segment_lock(segment, 0, &failure) == TC_OK) {
        int result = tc_segment_apply(segment, &verb, &state);
        tc_segment_unlock(segment);
        if (result == TC_OK && tc_segment_check_state(segment) != TC_OK) abort();
    }
    return 0;
}
