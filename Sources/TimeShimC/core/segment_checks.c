/*
 * What a segment must satisfy (timectl_segment_checks.h): results and
 * their phrases, the header's and the published state's checks, the
 * ranges a state and a verb must keep.
 */
#define _GNU_SOURCE
#include "timectl_segment_checks.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int tc_segment_fail(struct tc_failure *failure, int result) {
    if (failure) failure->result = result;
    return result;
}

int tc_segment_fail_syscall(struct tc_failure *failure, const char *name, long kernel_result) {
    if (failure) {
        failure->result = TC_E_SYSCALL;
        failure->syscall = name;
        failure->sys_errno = (int)-kernel_result;
    }
    return TC_E_SYSCALL;
}

const char *tc_result_phrase(int result) {
    switch (result) {
    case TC_OK: return "ok";
    case TC_E_SYSCALL: return "could not be accessed";
    case TC_E_MISSING: return "does not exist";
    case TC_E_SYMLINK: return "is a symbolic link";
    case TC_E_NOT_REGULAR: return "is not a regular file";
    case TC_E_NOT_OWNER: return "belongs to another user";
    case TC_E_MODE: return "is accessible to other users (must be mode 0600)";
    case TC_E_TRUNCATED: return "is truncated";
    case TC_E_NOT_SEGMENT: return "is not a timectl segment";
    case TC_E_VERSION: return "has another segment layout version";
    case TC_E_CORRUPT: return "is damaged (a header field, the clock state or the writer lock fails its checks)";
    case TC_E_EXISTS: return "already exists";
    case TC_E_RANGE: return "would move a clock outside 1900-01-01..2200-01-01";
    case TC_E_INVALID: return "was given an invalid argument";
    case TC_E_LOCK_TIMEOUT: return "is locked by another writer";
    default: return "failed";
    }
}

/* ---- self-checks ---- */

/* A 64-bit mix of `count` words: any change to one word changes the result. */
static uint64_t mix_words(uint64_t hash, const uint64_t *words, size_t count) {
    for (size_t i = 0; i < count; i++) {
        hash ^= words[i];
        hash *= 0x9e3779b97f4a7c15ULL;
        hash ^= hash >> 29;
    }
    return hash;
}

uint64_t tc_header_check(const struct tc_segment_header *header) {
    struct tc_segment_header copy;
    memcpy(&copy, header, sizeof(copy));
    copy.flags = 0;
    copy.check = 0;
    _Static_assert(sizeof(copy) % 8 == 0, "the header is whole words");
    uint64_t words[sizeof(copy) / 8];
    memcpy(words, &copy, sizeof(copy));
    return mix_words(0x54494d4543544c07ULL, words, sizeof(words) / 8);
}

uint32_t tc_state_check(const struct tc_clock_state *state, const struct tc_pending_verb *pending) {
    uint64_t words[7 + 6];
    size_t count = 7;
    memcpy(words, state, sizeof(*state));
    if (state->rate & TC_RATE_PENDING) {
        /* Everything but the anchor, which a reader may store at any time. */
        memcpy(&words[7], pending, 5 * sizeof(uint64_t));
        words[12] = (uint64_t)pending->file_boundary;
        count += 6;
    }
    uint64_t hash = mix_words(0x7374617465000007ULL, words, count);
    return (uint32_t)(hash ^ (hash >> 32));
}

int tc_split_valid(struct tc_split split) {
    const int64_t limit = 9000000000LL;
    return split.nsec >= 0 && split.nsec < TC_NS_PER_SECOND && split.sec > -limit && split.sec < limit;
}

static int rate_valid(uint64_t rate) { return rate == 0 || (rate >= TC_RATE_MIN && rate <= TC_RATE_MAX); }

/* A verb a writer may publish: the kinds and ranges tc_anchors_apply accepts. */
int tc_verb_valid(const struct tc_verb *verb) {
    switch (verb->kind) {
    case TC_VERB_FREEZE:
    case TC_VERB_FREEZE_WALL: return verb->wall >= TC_WALL_KEEP && verb->wall <= TC_WALL_RELATIVE;
    case TC_VERB_SET_RATE:
    case TC_VERB_RESUME: return verb->rate >= TC_RATE_MIN && verb->rate <= TC_RATE_MAX;
    case TC_VERB_ADVANCE: return verb->value >= 0;
    case TC_VERB_ADVANCE_TO: return tc_vclock_valid(verb->vclock);
    case TC_VERB_SET_WALL: return verb->wall == TC_WALL_ABSOLUTE || verb->wall == TC_WALL_RELATIVE;
    case TC_VERB_RESET: return 1;
    default: return 0;
    }
}

struct tc_verb tc_pending_verb_of(const struct tc_pending_verb *pending) {
    struct tc_verb verb = {
        .kind = __atomic_load_n(&pending->kind, __ATOMIC_RELAXED),
        .wall = __atomic_load_n(&pending->wall, __ATOMIC_RELAXED),
        .value = __atomic_load_n(&pending->value, __ATOMIC_RELAXED),
        .rate = __atomic_load_n(&pending->rate, __ATOMIC_RELAXED),
        .vclock = __atomic_load_n(&pending->vclock, __ATOMIC_RELAXED),
    };
    return verb;
}

/*
 * A state every reader can use: nanoseconds in range, a rate in range,
 * instants inside the supported range (with room for a running clock).
 */
int tc_state_valid(const struct tc_clock_state *state) {
    /* t0 is a real CLOCK_MONOTONIC reading: after boot, not past now (verbs anchor 1 µs ahead). */
    if (!tc_split_valid(state->t0) || state->t0.sec < 0 ||
        tc_split_to_ns(state->t0) > tc_real_ns(CLOCK_MONOTONIC) + TC_NS_PER_SECOND ||
        !rate_valid(state->rate & ~(TC_RATE_PENDING | TC_RATE_WALL_FROZEN)))
        return 0;
    for (int k = 0; k < TC_TRACK_COUNT; k++) {
        if (!tc_split_valid(state->offset[k])) return 0;
    }
    struct tc_anchors anchors = tc_anchors_unpack(state);
    for (int k = 0; k < TC_TRACK_COUNT; k++)
        if (!tc_instant_in_range(anchors.track[k])) return 0;
    return 1;
}

/*
 * A plausible pending verb, published in the copy that `seq` selects: one a
 * writer could publish, not yet anchored (tc_pending_unanchored(seq)) or
 * anchored at a real time read after its state's t0 — which lies up to
 * TC_ANCHOR_LEAD_NS ahead of the clock — and not after now.
 */
int tc_pending_valid(const struct tc_clock_state *state, const struct tc_pending_verb *pending, uint32_t seq) {
    struct tc_verb verb = tc_pending_verb_of(pending);
    if (!tc_verb_valid(&verb)) return 0;
    int64_t anchor = __atomic_load_n(&pending->anchor, __ATOMIC_RELAXED);
    return anchor == tc_pending_unanchored(seq) || (anchor >= tc_split_to_ns(state->t0) - TC_NS_PER_SECOND &&
                                                    anchor <= tc_real_ns(CLOCK_MONOTONIC) + TC_NS_PER_SECOND);
}

/* Copies the published copy that `seq` selects and checks it; TC_OK or TC_E_CORRUPT. */
