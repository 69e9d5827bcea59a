/*
 * The timeline's latch (core/segment_latch.c): applying a verb so that
 * readers see the old timeline or the new one, never half of each, and
 * reading a clock through it: inline while no verb lands, out of line
 * (tc_segment_read_contended) when one does.
 */
#ifndef TIMECTL_SEGMENT_LATCH_H
#define TIMECTL_SEGMENT_LATCH_H

#include "timectl_segment.h"
#include "timectl_timeline.h"

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The read of a clock when a verb lands during it or is pending. Never waits. */
void tc_segment_read_contended(const struct tc_segment *segment, int vclock, struct timespec *out);

/* The elapsed track's rate in effect (a pending verb's, if one is pending). */
uint64_t tc_segment_rate(const struct tc_segment *segment);

/* The rate a clock runs at now: the elapsed rate, or 0 for a wall clock while the wall stands still. */
uint64_t tc_segment_clock_rate(const struct tc_segment *segment, int vclock);

/* The published state's check and ranges only: TC_OK or TC_E_CORRUPT. */
int tc_segment_check_state(const struct tc_segment *segment);

/*
 * Applies a verb atomically (caller holds the writer lock): readers see the
 * state before or after it, never a mixture, and never wait. Refuses an
 * invalid verb (TC_E_INVALID), one out of range (TC_E_RANGE) or a damaged
 * state (TC_E_CORRUPT) before touching anything. Wakes every waiter on the
 * generation word. On TC_OK `published` holds the new state.
 */
int tc_segment_apply(struct tc_segment *segment, const struct tc_verb *verb, struct tc_clock_state *published);

/* The same, with the file-time boundary (tc_file_time_boundary, taken under the lock just before) that tells
   files written before the verb from files written after it; 0: none, the verb's real instant stands for it. */
int tc_segment_apply_bounded(struct tc_segment *segment, const struct tc_verb *verb, int64_t file_boundary,
                             struct tc_clock_state *published);

/* A consistent copy of the current state (a pending verb resolved), for status and the Swift clock. */
void tc_segment_snapshot(const struct tc_segment *segment, struct tc_clock_state *state);

/*
 * The read below without its out-of-line part: 1 with the clock in `*out`,
 * or 0 (a verb landed or is pending) with `*out` untouched; then
 * tc_segment_read_contended() reads. For read paths that keep the reading
 * in registers and go out of line themselves.
 */
__attribute__((always_inline)) static inline int tc_segment_try_read_into(const struct tc_segment *segment, int vclock,
                                                                        struct timespec *out) {
    const struct tc_timeline *timeline = &segment->timeline;
    uint32_t seq = __atomic_load_n(&timeline->seq, __ATOMIC_ACQUIRE);
    /* A branch, not an index: the predicted copy's loads need not wait for seq. */
    int read = seq & 1 ? tc_timeline_try_read(timeline, &timeline->copy[1].state, tc_track_of(vclock), seq, out)
                       : tc_timeline_try_read(timeline, &timeline->copy[0].state, tc_track_of(vclock), seq, out);
    if (__builtin_expect(read, 1)) tc_add_clock_offset(segment, vclock, out);
    return read;
}

/*
 * The read of a clock that stands still — a frozen session's, or the wall
 * under freeze --wall: loads and arithmetic, no call, so a read path that
 * tries it first saves no registers for it. 1 with the clock in `*out`; 0
 * with `*out` untouched when the clock runs (or a verb landed or is
 * pending): then tc_segment_try_read_into() reads.
 */
__attribute__((always_inline)) static inline int tc_segment_try_read_still(const struct tc_segment *segment, int vclock,
                                                                          struct timespec *out) {
    const struct tc_timeline *timeline = &segment->timeline;
    uint32_t seq = __atomic_load_n(&timeline->seq, __ATOMIC_ACQUIRE);
    /* An index this time: with no real-clock read to overlap, a branch measured no faster. */
    const struct tc_clock_state *state = &timeline->copy[seq & 1].state;
    uint64_t rate = TC_LOAD(state->rate);
    int track = tc_track_of(vclock);
    if (rate != 0 && (track != TC_TRACK_WALL || (rate & (TC_RATE_PENDING | TC_RATE_WALL_FROZEN)) != TC_RATE_WALL_FROZEN))
        return 0;
    struct timespec value = tc_state_at_anchor(state, track);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (TC_LOAD(timeline->seq) != seq) return 0;
    tc_add_clock_offset(segment, vclock, &value);
    *out = value;
    return 1;
}

/*
 * The read of a running clock at `real`, a reading of the real monotonic
 * clock taken before this is called — so that a caller keeps fewer values
 * across that reading (no register holds the sequence number or the rate
 * while the vDSO runs). 1 with the clock in `*out`; 0 with `*out` untouched
 * when the clock stands still (a frozen session, the wall under freeze
 * --wall), a verb is pending, or a verb landed meanwhile: then
 * tc_segment_try_read_into() reads. A verb published after `real` was read
 * anchors its timeline TC_ANCHOR_LEAD_NS past its own real-clock read, so
 * `real` lies before that anchor and the track reads the anchor: what a
 * reader racing the verb reads anyway, never less than the old timeline
 * gave at `real`.
 */
__attribute__((always_inline)) static inline int tc_segment_try_read_running(const struct tc_segment *segment, int vclock,
                                                                            struct timespec real, struct timespec *out) {
    const struct tc_timeline *timeline = &segment->timeline;
    uint32_t seq = __atomic_load_n(&timeline->seq, __ATOMIC_ACQUIRE);
    const struct tc_clock_state *state = seq & 1 ? &timeline->copy[1].state : &timeline->copy[0].state;
    uint64_t rate = TC_LOAD(state->rate);
    int track = tc_track_of(vclock);
    if (__builtin_expect((rate & (TC_RATE_PENDING | TC_RATE_WALL_FROZEN)) != 0, 0)) {
        /* Under freeze --wall the elapsed track still runs, at the rate without the flag. */
        if ((rate & TC_RATE_PENDING) || track == TC_TRACK_WALL) return 0;
        rate &= ~TC_RATE_WALL_FROZEN;
    }
    if (rate == 0) return 0;
    struct timespec value = tc_state_at(state, track, real, rate);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (TC_LOAD(timeline->seq) != seq) return 0;
    tc_add_clock_offset(segment, vclock, &value);
    *out = value;
    return 1;
}

/*
 * Reads a session clock into `*out`: a sequence load, a few loads and,
 * unless frozen, one real-clock read. Lock-free, wait-free while no verb
 * lands, allocation-free, async-signal-safe. Retries (a verb landed
 * meanwhile) and pending verbs are out of line.
 */
__attribute__((always_inline)) static inline void tc_segment_read_into(const struct tc_segment *segment, int vclock,
                                                                     struct timespec *out) {
    if (__builtin_expect(!tc_segment_try_read_into(segment, vclock, out), 0)) tc_segment_read_contended(segment, vclock, out);
}

/* The same, in nanoseconds. */
static inline int64_t tc_segment_read(const struct tc_segment *segment, int vclock) {
    struct timespec value;
    tc_segment_read_into(segment, vclock, &value);
    return tc_timespec_ns(value);
}

#ifdef __cplusplus
}
#endif

#endif
