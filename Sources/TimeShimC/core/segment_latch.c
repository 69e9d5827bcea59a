/*
 * The timeline's latch (timectl_segment_latch.h): two copies of the clock
 * state behind a sequence, a verb published into the one readers are not
 * reading, a pending verb resolved by whoever reads it first.
 */
#define _GNU_SOURCE
#include "timectl_segment_latch.h"
#include "timectl_segment_checks.h"
#include "timectl_filetimes.h"

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

static int load_published(const struct tc_timeline *timeline, uint32_t seq, struct tc_clock_state *state,
                          struct tc_pending_verb *pending);

int tc_segment_check_state(const struct tc_segment *segment) {
    const struct tc_timeline *timeline = &segment->timeline;
    for (;;) {
        uint32_t seq = __atomic_load_n(&timeline->seq, __ATOMIC_ACQUIRE);
        struct tc_clock_state state;
        struct tc_pending_verb pending;
        int result = load_published(timeline, seq, &state, &pending);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&timeline->seq, __ATOMIC_RELAXED) == seq) return result;
    }
}


static void load_split(struct tc_split *to, const struct tc_split *from) {
    to->sec = __atomic_load_n(&from->sec, __ATOMIC_RELAXED);
    to->nsec = __atomic_load_n(&from->nsec, __ATOMIC_RELAXED);
}

static void store_split(struct tc_split *to, const struct tc_split *from) {
    __atomic_store_n(&to->sec, from->sec, __ATOMIC_RELAXED);
    __atomic_store_n(&to->nsec, from->nsec, __ATOMIC_RELAXED);
}

static void load_state(struct tc_clock_state *to, const struct tc_clock_state *from) {
    load_split(&to->t0, &from->t0);
    to->rate = __atomic_load_n(&from->rate, __ATOMIC_RELAXED);
    for (int k = 0; k < TC_TRACK_COUNT; k++) load_split(&to->offset[k], &from->offset[k]);
}

static void store_state(struct tc_clock_state *to, const struct tc_clock_state *from) {
    store_split(&to->t0, &from->t0);
    __atomic_store_n(&to->rate, from->rate, __ATOMIC_RELAXED);
    for (int k = 0; k < TC_TRACK_COUNT; k++) store_split(&to->offset[k], &from->offset[k]);
}

static void load_pending(struct tc_pending_verb *to, const struct tc_pending_verb *from) {
    struct tc_verb verb = tc_pending_verb_of(from);
    to->kind = verb.kind;
    to->wall = verb.wall;
    to->value = verb.value;
    to->rate = verb.rate;
    to->vclock = verb.vclock;
    to->reserved = 0;
    to->real_offset = __atomic_load_n(&from->real_offset, __ATOMIC_RELAXED);
    to->anchor = __atomic_load_n(&from->anchor, __ATOMIC_RELAXED);
    to->file_boundary = __atomic_load_n(&from->file_boundary, __ATOMIC_RELAXED);
}

static int load_published(const struct tc_timeline *timeline, uint32_t seq, struct tc_clock_state *state,
                          struct tc_pending_verb *pending) {
    const struct tc_published *copy = &timeline->copy[seq & 1];
    load_state(state, &copy->state);
    load_pending(pending, &timeline->pending[seq & 1]);
    uint32_t check = __atomic_load_n(&copy->check, __ATOMIC_RELAXED);
    if (check != tc_state_check(state, pending) || !tc_state_valid(state)) return TC_E_CORRUPT;
    if ((state->rate & TC_RATE_PENDING) && !tc_pending_valid(state, pending, seq)) return TC_E_CORRUPT;
    return TC_OK;
}

/*
 * The anchor of the verb pending in the copy that `seq` selects: the real
 * monotonic time it takes effect. The first process to need it stores the
 * real time it read after seeing the verb published, so every reader that
 * read the state before the verb did so before the anchor, and a verb that
 * slows the clock never moves it back, however long its writer was stopped
 * before publishing it. The compare-and-swap expects this publication's
 * unanchored value: a reader held since it read an earlier verb pending in
 * the same slot finds another value and stores nothing (seq has moved, so
 * its read is retried whatever this returns).
 */
static int64_t pending_anchor(struct tc_pending_verb *shared, uint32_t seq, int64_t real_now) {
    int64_t unanchored = tc_pending_unanchored(seq);
    int64_t anchor = __atomic_load_n(&shared->anchor, __ATOMIC_ACQUIRE);
    if (anchor == unanchored &&
        __atomic_compare_exchange_n(&shared->anchor, &anchor, real_now, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return real_now;
    /* Anchored by another process; or, if negative, published again since `seq`. */
    return anchor < 0 ? real_now : anchor;
}

/*
 * The state a pending verb leads to: the verb applied at its anchor, with
 * timectl_timeline.h's arithmetic, exactly as its writer will publish it.
 * A verb that no longer fits the range at that anchor leaves the state as
 * it was (the writer reports it as refused).
 */
static int resolve_pending(const struct tc_segment *segment, const struct tc_clock_state *before,
                           const struct tc_pending_verb *pending, int64_t anchor, struct tc_anchors *out) {
    struct tc_clock_state state = *before;
    state.rate &= ~TC_RATE_PENDING;
    *out = tc_anchors_unpack(&state);
    struct tc_anchors applied = *out;
    struct tc_verb verb = tc_pending_verb_of(pending);
    struct tc_real_now now = {anchor, anchor + pending->real_offset};
    int result = tc_anchors_apply(&applied, &segment->header, &verb, now);
    if (result == TC_OK) *out = applied;
    return result;
}

/* Reads copy `index` under `seq` into anchors (a pending verb resolved); 0 if seq changed meanwhile. */
static int read_copy(const struct tc_segment *segment, uint32_t seq, struct tc_anchors *anchors, int64_t *real_now) {
    const struct tc_timeline *timeline = &segment->timeline;
    uint32_t index = seq & 1;
    struct tc_clock_state state;
    load_state(&state, &timeline->copy[index].state);
    *real_now = tc_real_ns(CLOCK_MONOTONIC);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (state.rate & TC_RATE_PENDING) {
        struct tc_pending_verb pending;
        load_pending(&pending, &timeline->pending[index]);
        /* Readers do not write into the mapping unless the anchor is unset, once per verb. */
        int64_t anchor = pending_anchor((struct tc_pending_verb *)&timeline->pending[index], seq, *real_now);
        resolve_pending(segment, &state, &pending, anchor, anchors);
    } else {
        *anchors = tc_anchors_unpack(&state);
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&timeline->seq, __ATOMIC_RELAXED) == seq;
}

void tc_segment_read_contended(const struct tc_segment *segment, int vclock, struct timespec *out) {
    const struct tc_timeline *timeline = &segment->timeline;
    int track = tc_track_of(vclock);
    for (;;) {
        uint32_t seq = __atomic_load_n(&timeline->seq, __ATOMIC_ACQUIRE);
        const struct tc_clock_state *state = &timeline->copy[seq & 1].state;
        if (!(__atomic_load_n(&state->rate, __ATOMIC_RELAXED) & TC_RATE_PENDING)) {
            if (tc_timeline_try_read(timeline, state, track, seq, out)) break;
            continue;
        }
        struct tc_anchors anchors;
        int64_t real_now;
        if (read_copy(segment, seq, &anchors, &real_now)) {
            *out = tc_timespec_from_ns(tc_anchors_value(&anchors, track, real_now));
            break;
        }
    }
    tc_add_clock_offset(segment, vclock, out);
}

uint64_t tc_segment_rate(const struct tc_segment *segment) {
    struct tc_anchors anchors;
    int64_t real_now;
    while (!read_copy(segment, __atomic_load_n(&segment->timeline.seq, __ATOMIC_ACQUIRE), &anchors, &real_now)) {
    }
    return anchors.rate;
}

uint64_t tc_segment_clock_rate(const struct tc_segment *segment, int vclock) {
    struct tc_anchors anchors;
    int64_t real_now;
    while (!read_copy(segment, __atomic_load_n(&segment->timeline.seq, __ATOMIC_ACQUIRE), &anchors, &real_now)) {
    }
    return tc_anchors_track_rate(&anchors, tc_track_of(vclock));
}

void tc_segment_snapshot(const struct tc_segment *segment, struct tc_clock_state *state) {
    struct tc_anchors anchors;
    int64_t real_now;
    while (!read_copy(segment, __atomic_load_n(&segment->timeline.seq, __ATOMIC_ACQUIRE), &anchors, &real_now)) {
    }
    tc_anchors_pack(state, &anchors);
}

/*
 * Publishes `state` (and the pending verb, if its rate says so) in the copy
 * readers are not using, then moves them to it. Caller holds the writer
 * lock; returns the new seq.
 */
static uint32_t publish(struct tc_timeline *timeline, uint32_t seq, const struct tc_clock_state *state,
                        const struct tc_pending_verb *pending) {
    uint32_t index = (seq + 1) & 1;
    /* Readers of this copy (from before the last publication) must see seq moved if they see any store below. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (pending) {
        struct tc_pending_verb *to = &timeline->pending[index];
        __atomic_store_n(&to->kind, pending->kind, __ATOMIC_RELAXED);
        __atomic_store_n(&to->wall, pending->wall, __ATOMIC_RELAXED);
        __atomic_store_n(&to->value, pending->value, __ATOMIC_RELAXED);
        __atomic_store_n(&to->rate, pending->rate, __ATOMIC_RELAXED);
        __atomic_store_n(&to->vclock, pending->vclock, __ATOMIC_RELAXED);
        __atomic_store_n(&to->real_offset, pending->real_offset, __ATOMIC_RELAXED);
        __atomic_store_n(&to->file_boundary, pending->file_boundary, __ATOMIC_RELAXED);
        __atomic_store_n(&to->anchor, tc_pending_unanchored(seq + 1), __ATOMIC_RELAXED);
    }
    store_state(&timeline->copy[index].state, state);
    __atomic_store_n(&timeline->copy[index].check, tc_state_check(state, pending), __ATOMIC_RELAXED);
    __atomic_store_n(&timeline->seq, seq + 1, __ATOMIC_RELEASE);
    /* The real time read next must come after every reader can see the new copy. */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return seq + 1;
}

/* Resolves a pending verb left published by its writer (stopped short, or killed): the latch's repair. */
static uint32_t publish_resolved(struct tc_segment *segment, uint32_t seq, const struct tc_clock_state *current,
                                 struct tc_clock_state *resolved, int *verb_result) {
    struct tc_timeline *timeline = &segment->timeline;
    struct tc_pending_verb pending;
    load_pending(&pending, &timeline->pending[seq & 1]);
    int64_t anchor = pending_anchor(&timeline->pending[seq & 1], seq, tc_real_ns(CLOCK_MONOTONIC));
    struct tc_anchors anchors;
    int result = resolve_pending(segment, current, &pending, anchor, &anchors);
    if (verb_result) *verb_result = result;
    tc_anchors_pack(resolved, &anchors);
    seq = publish(timeline, seq, resolved, NULL);
    /* The session's past, for file times: from the verb's real instant on (its file-time boundary, when its
       writer took one), the wall reads this. */
    if (result == TC_OK) {
        uint64_t rate = tc_anchors_track_rate(&anchors, TC_TRACK_WALL);
        if (pending.file_boundary)
            tc_history_append(segment, pending.file_boundary, anchors.track[TC_TRACK_WALL], rate | TC_HISTORY_EXACT_START);
        else tc_history_append(segment, anchors.t0 + pending.real_offset, anchors.track[TC_TRACK_WALL], rate);
    }
    return seq;
}

/*
 * Applies a verb in two publications: the verb pending on the old state,
 * then the state it leads to. Checks everything before touching anything: a
 * refused verb leaves the segment as it was.
 */
int tc_segment_apply(struct tc_segment *segment, const struct tc_verb *verb, struct tc_clock_state *published) {
    return tc_segment_apply_bounded(segment, verb, 0, published);
}

int tc_segment_apply_bounded(struct tc_segment *segment, const struct tc_verb *verb, int64_t file_boundary,
                             struct tc_clock_state *published) {
    if (!tc_verb_valid(verb)) return TC_E_INVALID;
    struct tc_timeline *timeline = &segment->timeline;
    uint32_t seq = __atomic_load_n(&timeline->seq, __ATOMIC_ACQUIRE);
    struct tc_clock_state state;
    struct tc_pending_verb left;
    if (load_published(timeline, seq, &state, &left) != TC_OK) return TC_E_CORRUPT;
    if (state.rate & TC_RATE_PENDING) {
        struct tc_clock_state resolved;
        seq = publish_resolved(segment, seq, &state, &resolved, NULL);
        state = resolved;
    }

    struct tc_real_now now = {tc_real_ns(CLOCK_MONOTONIC), tc_real_ns(CLOCK_REALTIME)};
    struct tc_anchors trial = tc_anchors_unpack(&state);
    int result = tc_anchors_apply(&trial, &segment->header, verb, now);
    if (result != TC_OK) return result;

    struct tc_pending_verb pending = {
        .kind = verb->kind, .wall = verb->wall, .value = verb->value, .rate = verb->rate,
        .vclock = verb->vclock, .real_offset = now.realtime - now.monotonic, .file_boundary = file_boundary,
    };
    struct tc_clock_state before = state;
    before.rate |= TC_RATE_PENDING;
    seq = publish(timeline, seq, &before, &pending);
    seq = publish_resolved(segment, seq, &before, &state, &result);

    __atomic_fetch_add(&segment->verbs_applied, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&segment->generation, 1, __ATOMIC_RELEASE);
    tc_raw_syscall(SYS_futex, &segment->generation, FUTEX_WAKE, INT_MAX, 0, 0, 0);
    if (published) *published = state;
    return result;
}
