/*
 * File times that follow the session (SPEC §9): the one place that maps a
 * real file time to the virtual wall time at which it happened, and back.
 *
 * The session remembers its past in the segment's history ring (struct
 * tc_history_entry, docs/segment.md "The history"): one entry per verb, the
 * real CLOCK_REALTIME at which the interval began and the affine map
 * real → virtual wall over it. A real instant T maps as follows:
 *
 *   - before the session was created (header.created_realtime): T itself.
 *     Files older than the session keep the times they have, so a build
 *     cache or Python's bytecode cache made before it stays valid;
 *   - inside a remembered interval: wall_start + (T − real_start) × wall_rate
 *     (a frozen interval maps all of it to wall_start);
 *   - up to one kernel tick (`granularity`, the resolution of
 *     CLOCK_REALTIME_COARSE) before an interval or the session began: that
 *     interval's wall_start. The kernel stamps files from the coarse clock,
 *     which lags CLOCK_REALTIME by up to a tick, so a file written right
 *     after a verb (or in a session's first milliseconds) carries a real
 *     time a little before the verb; it is taken as the verb's instant, and
 *     so is a file written in that last tick before it;
 *   - after the real now (a time set explicitly into the future): the
 *     virtual now plus the same distance, so it stays in the session's
 *     future until the session's real time reaches it;
 *   - after the session began but before the oldest interval still in the
 *     ring (more verbs than its capacity since): the oldest one's
 *     wall_start − (its real_start − T), i.e. placed before it at real speed,
 *     so the order of files is kept.
 *
 * Back, for explicit times given to utimensat and friends, a virtual instant
 * V maps to the earliest real instant at which the session's wall clock
 * showed V (or first passed it, if a tick jumped over it): the start of a
 * frozen interval that showed V, for example, so that stat shows V again.
 * V before the session's creation maps to itself; a V after the virtual now
 * maps to the real now plus the same distance (stat shows V until the real
 * clock gets there; from then on, what the session showed at that instant).
 *
 * Readers take no lock: an entry is valid when its `number` matches before
 * and after the read (a writer overwriting the oldest slot changes it).
 *
 * An interval whose start is exact (TC_HISTORY_EXACT_START: its verb was
 * given a file-time boundary, tc_file_time_boundary in timectl_segment_file.h) needs no tick
 * of slack: every file written before the verb carries a time below its
 * real_start, every file written after it one at or above, so a file
 * written a microsecond before an auto-advance step keeps the time before
 * the step. On file systems that stamp coarsely even then (or kernels
 * before multigrain time stamps) a file written in the verb's own tick may
 * fall on either side.
 */
#ifndef TIMECTL_FILETIMES_H
#define TIMECTL_FILETIMES_H

#include "timectl_timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* History ring capacity of a new segment: 4096 verbs, 128 KiB. */
#define TC_HISTORY_ENTRIES 4096u


struct tc_history_view {
    int64_t real_start;
    int64_t wall_start;
    uint64_t wall_rate;
};

static inline const struct tc_history_entry *tc_history_entries(const struct tc_segment *segment) {
    return (const struct tc_history_entry *)((const char *)segment + segment->header.history_offset);
}

/* Reads entry n (counting from 0) into *view; 0 if it is no longer (or not yet) in the ring. */
static inline int tc_history_read(const struct tc_segment *segment, uint64_t n, struct tc_history_view *view) {
    uint32_t capacity = segment->header.history_capacity;
    const struct tc_history_entry *entry = &tc_history_entries(segment)[n % capacity];
    if (__atomic_load_n(&entry->number, __ATOMIC_ACQUIRE) != n + 1) return 0;
    view->real_start = __atomic_load_n(&entry->real_start, __ATOMIC_RELAXED);
    view->wall_start = __atomic_load_n(&entry->wall_start, __ATOMIC_RELAXED);
    view->wall_rate = __atomic_load_n(&entry->wall_rate, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&entry->number, __ATOMIC_RELAXED) == n + 1;
}

/* Appends an interval; the caller holds the writer lock (or formats a new segment). */
static inline void tc_history_append(struct tc_segment *segment, int64_t real_start, int64_t wall_start,
                                     uint64_t wall_rate) {
    uint32_t capacity = segment->header.history_capacity;
    if (capacity == 0) return;
    uint64_t n = __atomic_load_n(&segment->history_count, __ATOMIC_RELAXED);
    struct tc_history_entry *entry =
        (struct tc_history_entry *)((char *)segment + segment->header.history_offset) + n % capacity;
    __atomic_store_n(&entry->number, 0, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&entry->real_start, real_start, __ATOMIC_RELAXED);
    __atomic_store_n(&entry->wall_start, wall_start, __ATOMIC_RELAXED);
    __atomic_store_n(&entry->wall_rate, wall_rate, __ATOMIC_RELAXED);
    __atomic_store_n(&entry->number, n + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&segment->history_count, n + 1, __ATOMIC_RELEASE);
}

/* The virtual wall time at which the real CLOCK_REALTIME instant `real` happened, in the session;
 * `granularity` is the kernel's file-time resolution (ns). */
static inline int64_t tc_file_time_to_virtual(const struct tc_segment *segment, int64_t real, int64_t granularity) {
    if (real < segment->header.created_realtime - granularity || segment->header.history_capacity == 0) return real;
    int64_t real_now = tc_real_ns(CLOCK_REALTIME);
    if (real > real_now) {
        int64_t ahead = real - real_now, now = tc_segment_read(segment, TC_VCLOCK_REALTIME);
        return now > TC_INSTANT_MAX - ahead ? TC_INSTANT_MAX : now + ahead;
    }
    uint64_t count = __atomic_load_n(&segment->history_count, __ATOMIC_ACQUIRE);
    uint32_t capacity = segment->header.history_capacity;
    uint64_t oldest = count > capacity ? count - capacity : 0;
    struct tc_history_view view, oldest_seen = {0, 0, 0};
    int seen = 0;
    for (uint64_t n = count; n-- > oldest;) {
        if (!tc_history_read(segment, n, &view)) continue;
        int exact = (view.wall_rate & TC_HISTORY_EXACT_START) != 0;
        uint64_t rate = view.wall_rate & ~TC_HISTORY_EXACT_START;
        if (real >= view.real_start) return view.wall_start + tc_scale(real - view.real_start, rate);
        if (!exact && real >= view.real_start - granularity) return view.wall_start;
        /* Before the session's first instant: older than the session, its own time. */
        if (n == 0) return real;
        oldest_seen = view;
        seen = 1;
    }
    if (!seen) return real;
    return oldest_seen.wall_start - (oldest_seen.real_start - real);
}

/* The real instant to store for the virtual wall instant `virtual_time` (see above). */
static inline int64_t tc_file_time_to_real(const struct tc_segment *segment, int64_t virtual_time) {
    if (virtual_time < segment->header.created_realtime || segment->header.history_capacity == 0)
        return virtual_time;
    int64_t now = tc_segment_read(segment, TC_VCLOCK_REALTIME);
    if (virtual_time > now) {
        int64_t ahead = virtual_time - now, real_now = tc_real_ns(CLOCK_REALTIME);
        return real_now > TC_INSTANT_MAX - ahead ? TC_INSTANT_MAX : real_now + ahead;
    }
    uint64_t count = __atomic_load_n(&segment->history_count, __ATOMIC_ACQUIRE);
    uint32_t capacity = segment->header.history_capacity;
    uint64_t oldest = count > capacity ? count - capacity : 0;
    struct tc_history_view view, next;
    int have_last = 0;
    struct tc_history_view last = {0, 0, 0};
    for (uint64_t n = oldest; n < count; n++) {
        if (!tc_history_read(segment, n, &view)) continue;
        view.wall_rate &= ~TC_HISTORY_EXACT_START;
        last = view;
        have_last = 1;
        if (view.wall_start >= virtual_time) return view.real_start;  /* shows V, or jumped past it */
        if (view.wall_rate == 0) continue;
        int64_t wait = tc_real_wait_ns(view.wall_start, virtual_time, view.wall_rate);
        int64_t real = wait == TC_FOREVER || view.real_start > TC_INSTANT_MAX - wait ? TC_INSTANT_MAX : view.real_start + wait;
        int bounded = n + 1 < count && tc_history_read(segment, n + 1, &next);
        if (!bounded || real < next.real_start) return real;
    }
    if (!have_last) return virtual_time;
    return last.real_start + (virtual_time - last.wall_start);
}

#ifdef __cplusplus
}
#endif

#endif
