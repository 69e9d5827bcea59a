/*
 * Timeline arithmetic: the one place that says what a verb does to the
 * clocks (SPEC §2) and what a clock reads. Used by the shim's read path and
 * by TimeControlKit (verbs, status, the Swift Clock), so both always agree.
 *
 * Writers work on struct tc_anchors (plain nanoseconds) and pack it into
 * the segment's split form; readers work on the split form directly.
 * Instants (every anchor) stay within [TC_INSTANT_MIN, TC_INSTANT_MAX]; a
 * running clock saturates TC_RUN_MAX after its anchor; together these keep
 * every sum inside int64.
 */
#ifndef TIMECTL_TIMELINE_H
#define TIMECTL_TIMELINE_H

#include "timectl_realclock.h"
#include "timectl_segment.h"

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Constants rather than macros so that Swift imports them. */
static const int64_t TC_NS_PER_SECOND = 1000000000LL;
static const int64_t TC_INSTANT_MIN = -2208988800LL * 1000000000LL; /* 1900-01-01T00:00:00Z */
static const int64_t TC_INSTANT_MAX = 7258118400LL * 1000000000LL;  /* 2200-01-01T00:00:00Z */
static const int64_t TC_RUN_MAX = INT64_MAX - 7258118400LL * 1000000000LL; /* about 62 years */

/* Rates are fixed point with 32 fraction bits. */
#define TC_RATE_SHIFT 32
static const uint64_t TC_RATE_ONE = 1ULL << 32;
static const uint64_t TC_RATE_MIN = (1ULL << 32) / 1000;  /* 0.001 */
static const uint64_t TC_RATE_MAX = (1ULL << 32) * 1000000; /* 1e6 */

/*
 * A verb re-anchors the timeline a little in the future of the moment it
 * reads the real clock. Readers that raced the verb with the old state can
 * only have seen values up to about that moment; anchoring later, with the
 * values the old state gives there, keeps every clock monotonic whatever
 * the rate change, even if a reader's real-clock read is reordered by a few
 * cycles. Between the publication and t0 the clocks read their anchors.
 */
#define TC_ANCHOR_LEAD_NS 1000

enum tc_verb_kind {
    TC_VERB_FREEZE = 1,   /* rate := 0, and the wall clock per `wall` */
    TC_VERB_SET_RATE = 2, /* rate := `rate` (resume, rate) */
    TC_VERB_ADVANCE = 3,  /* every clock += `value` (tick), value ≥ 0 */
    TC_VERB_SET_WALL = 4, /* the wall clock per `wall`; monotonic clocks untouched */
    TC_VERB_RESET = 5,    /* wall := real wall, rate := 1 */
    TC_VERB_ADVANCE_TO = 6, /* every clock forward until `vclock` reads `value` (no-op if it already does) */
    TC_VERB_FREEZE_WALL = 7, /* the wall clock stands still, moved per `wall`; the elapsed track keeps its rate */
    TC_VERB_RESUME = 8,   /* rate := `rate`, and a frozen wall clock runs again from where it stands */
};

/* What a verb does to the wall clock. */
enum tc_wall_change {
    TC_WALL_KEEP = 0,
    TC_WALL_ABSOLUTE = 1, /* wall := value (ns since the epoch) */
    TC_WALL_RELATIVE = 2, /* wall += value (either sign) */
};

struct tc_verb {
    int32_t kind;         /* enum tc_verb_kind */
    int32_t wall;         /* enum tc_wall_change, for FREEZE and SET_WALL */
    int64_t value;        /* ns: the wall instant or shift, the ADVANCE duration, the ADVANCE_TO target */
    uint64_t rate;        /* SET_RATE, fixed point */
    int32_t vclock;       /* ADVANCE_TO: the clock `value` is on */
    int32_t reserved;
};

/* Real clocks as a verb sees them, read once per verb. */
struct tc_real_now {
    int64_t monotonic;
    int64_t realtime;
};

/*
 * A state in plain nanoseconds: each track reads track[k] at real time t0
 * and runs at `rate`, except the wall track while `wall_frozen` (then it
 * stands still). Packed, `wall_frozen` is TC_RATE_WALL_FROZEN in the rate.
 */
struct tc_anchors {
    int64_t t0;
    uint64_t rate;
    int64_t track[TC_TRACK_COUNT];
    int32_t wall_frozen;
    int32_t reserved;
};

enum tc_result {
    TC_OK = 0,
    TC_E_SYSCALL = 1,      /* a system call failed: tc_failure says which, with errno */
    TC_E_MISSING = 2,      /* the segment file does not exist */
    TC_E_SYMLINK = 3,      /* the path is a symbolic link */
    TC_E_NOT_REGULAR = 4,  /* not a regular file */
    TC_E_NOT_OWNER = 5,    /* owned by another user */
    TC_E_MODE = 6,         /* readable or writable by group or others */
    TC_E_TRUNCATED = 7,    /* shorter than its header says */
    TC_E_NOT_SEGMENT = 8,  /* no timectl magic */
    TC_E_VERSION = 9,      /* another layout version */
    TC_E_CORRUPT = 10,     /* damaged: a header field, the state or the writer lock fails its checks */
    TC_E_EXISTS = 11,      /* creation raced with another creator */
    TC_E_RANGE = 12,       /* the verb would take a clock outside the supported range */
    TC_E_INVALID = 13,     /* an argument outside its domain */
    TC_E_LOCK_TIMEOUT = 14 /* another writer held the lock too long */
};

/* Maps a clock id to the session clock that replaces it, or −1 (pass through). */
static inline int tc_vclock_for_clockid(clockid_t clock) {
    switch (clock) {
    case CLOCK_REALTIME:
    case CLOCK_REALTIME_COARSE:
    case CLOCK_REALTIME_ALARM: return TC_VCLOCK_REALTIME;
    case CLOCK_MONOTONIC:
    case CLOCK_MONOTONIC_COARSE: return TC_VCLOCK_MONOTONIC;
    case CLOCK_MONOTONIC_RAW: return TC_VCLOCK_MONOTONIC_RAW;
    case CLOCK_BOOTTIME:
    case CLOCK_BOOTTIME_ALARM: return TC_VCLOCK_BOOTTIME;
    case CLOCK_TAI: return TC_VCLOCK_TAI;
    default: return -1;
    }
}

static inline int tc_track_of(int vclock) {
    return vclock >= TC_VCLOCK_REALTIME ? TC_TRACK_WALL : TC_TRACK_ELAPSED;
}

static inline int tc_vclock_valid(int vclock) { return vclock >= 0 && vclock < TC_VCLOCK_COUNT; }

/* ---- nanoseconds and splits ---- */

/* Splits nanoseconds into seconds and nanoseconds, flooring (instants before 1970 included). */
static inline struct tc_split tc_split_ns(int64_t ns) {
    struct tc_split split = {ns / TC_NS_PER_SECOND, ns % TC_NS_PER_SECOND};
    if (split.nsec < 0) {
        split.nsec += TC_NS_PER_SECOND;
        split.sec -= 1;
    }
    return split;
}

static inline int64_t tc_split_to_ns(struct tc_split split) { return split.sec * TC_NS_PER_SECOND + split.nsec; }

static inline struct timespec tc_timespec_from_ns(int64_t ns) {
    struct tc_split split = tc_split_ns(ns);
    struct timespec ts = {split.sec, split.nsec};
    return ts;
}

/* Every conversion of a caller's timespec to nanoseconds goes through these: which values the kernel
   refuses with EINVAL, and where a huge one saturates, are decided once, here. */

/* An instant or span the caller took from a clock (any sign, normalised): exact for ±292 years. */
static inline int64_t tc_timespec_ns(struct timespec ts) { return (int64_t)ts.tv_sec * TC_NS_PER_SECOND + ts.tv_nsec; }

/* A timeout or a timer value as the kernel accepts one: tv_sec ≥ 0, 0 ≤ tv_nsec < 10^9. */
static inline int tc_timespec_valid(const struct timespec *ts) {
    return ts->tv_sec >= 0 && ts->tv_nsec >= 0 && ts->tv_nsec < TC_NS_PER_SECOND;
}

/* A valid timeout's nanoseconds, saturating at INT64_MAX (292 years: for ever, to a waiter). */
static inline int64_t tc_timespec_ns_saturating(const struct timespec *ts) {
    return ts->tv_sec > (INT64_MAX - ts->tv_nsec) / TC_NS_PER_SECOND ? INT64_MAX
                                                                     : (int64_t)ts->tv_sec * TC_NS_PER_SECOND + ts->tv_nsec;
}

/* Both: 0 if the kernel would refuse the timeout with EINVAL. */
static inline int tc_timespec_to_ns(const struct timespec *ts, int64_t *ns) {
    if (!tc_timespec_valid(ts)) return 0;
    *ns = tc_timespec_ns_saturating(ts);
    return 1;
}

/* An absolute deadline as glibc's timed waits accept one: only tv_nsec is checked (0 ≤ tv_nsec < 10^9);
   a negative tv_sec lies before every clock's start, so the wait times out at once. */
static inline int tc_deadline_valid(const struct timespec *ts) { return ts->tv_nsec >= 0 && ts->tv_nsec < TC_NS_PER_SECOND; }

/* A valid deadline's nanoseconds: INT64_MIN before 1970 (already passed), saturating at INT64_MAX. */
static inline int64_t tc_deadline_ns(const struct timespec *ts) {
    return ts->tv_sec < 0 ? INT64_MIN : tc_timespec_ns_saturating(ts);
}

/* sec/nsec with 0 ≤ nsec < 2·10^9 → a normalised timespec. */
static inline struct timespec tc_timespec_normalised(int64_t sec, int64_t nsec) {
    if (nsec >= TC_NS_PER_SECOND) {
        nsec -= TC_NS_PER_SECOND;
        sec += 1;
    }
    struct timespec ts = {sec, nsec};
    return ts;
}

/* The virtual time that passes in `real_delta` real ns at `rate`. */
static inline int64_t tc_scale(int64_t real_delta, uint64_t rate) {
    if (real_delta <= 0) return 0;
    unsigned __int128 product = ((unsigned __int128)(uint64_t)real_delta * rate) >> TC_RATE_SHIFT;
    return product > (unsigned __int128)TC_RUN_MAX ? TC_RUN_MAX : (int64_t)product;
}

/* A real wait that only a verb can end: the clock stands still, or the wait is too long to matter. */
#define TC_FOREVER INT64_MAX

/*
 * How long, in real ns, a wait from the virtual instant `now` to `deadline`
 * takes on a clock running at `rate` (fixed point, without flags): 0 if it
 * is due, TC_FOREVER if the clock stands still (rate 0) or the wait would
 * outlast INT64_MAX / 2 real ns. Rounded up, so that a wait of that length
 * never ends before its virtual deadline (tc_scale of it is ≥ the distance).
 * The inverse of tc_scale, for every waiter: the shim's and the Swift clock's.
 */
static inline int64_t tc_real_wait_ns(int64_t now, int64_t deadline, uint64_t rate) {
    if (now >= deadline) return 0;
    if (rate == 0) return TC_FOREVER;
    unsigned __int128 distance = (uint64_t)deadline - (uint64_t)now; /* deadline > now: no wrap */
    unsigned __int128 real = ((distance << TC_RATE_SHIFT) + rate - 1) / rate;
    return real >= (unsigned __int128)(INT64_MAX / 2) ? TC_FOREVER : (int64_t)real;
}

/* ---- the writer's form ---- */

/* The rate a track runs at: the session's, or 0 for a frozen wall. */
static inline uint64_t tc_anchors_track_rate(const struct tc_anchors *anchors, int track) {
    return track == TC_TRACK_WALL && anchors->wall_frozen ? 0 : anchors->rate;
}

static inline void tc_anchors_pack(struct tc_clock_state *state, const struct tc_anchors *anchors) {
    state->t0 = tc_split_ns(anchors->t0);
    state->rate = anchors->rate | (anchors->wall_frozen ? TC_RATE_WALL_FROZEN : 0);
    for (int k = 0; k < TC_TRACK_COUNT; k++) state->offset[k] = tc_split_ns(anchors->track[k] - anchors->t0);
}

static inline struct tc_anchors tc_anchors_unpack(const struct tc_clock_state *state) {
    struct tc_anchors anchors;
    anchors.t0 = tc_split_to_ns(state->t0);
    anchors.rate = state->rate & ~TC_RATE_WALL_FROZEN;
    anchors.wall_frozen = (state->rate & TC_RATE_WALL_FROZEN) != 0;
    anchors.reserved = 0;
    for (int k = 0; k < TC_TRACK_COUNT; k++) anchors.track[k] = anchors.t0 + tc_split_to_ns(state->offset[k]);
    return anchors;
}

/* What a track reads at real monotonic time `real_now`. */
static inline int64_t tc_anchors_value(const struct tc_anchors *anchors, int track, int64_t real_now) {
    return anchors->track[track] + tc_scale(real_now - anchors->t0, tc_anchors_track_rate(anchors, track));
}

static inline int tc_instant_in_range(int64_t value) {
    return value >= TC_INSTANT_MIN && value <= TC_INSTANT_MAX;
}

/* Moves the wall track. */
static inline int tc_change_wall(struct tc_anchors *anchors, int change, int64_t value) {
    int64_t wall = anchors->track[TC_TRACK_WALL];
    switch (change) {
    case TC_WALL_KEEP: return TC_OK;
    case TC_WALL_ABSOLUTE: wall = value; break;
    case TC_WALL_RELATIVE:
        if (value > 0 ? wall > TC_INSTANT_MAX - value : wall < TC_INSTANT_MIN - value) return TC_E_RANGE;
        wall += value;
        break;
    default: return TC_E_INVALID;
    }
    if (!tc_instant_in_range(wall)) return TC_E_RANGE;
    anchors->track[TC_TRACK_WALL] = wall;
    return TC_OK;
}

/*
 * Applies a verb at the real instant `now` (SPEC §2). Returns TC_OK, or
 * TC_E_RANGE / TC_E_INVALID leaving `anchors` unspecified (callers apply
 * to a copy).
 */
static inline int tc_anchors_apply(struct tc_anchors *anchors, const struct tc_segment_header *header,
                                   const struct tc_verb *verb, struct tc_real_now now) {
    int64_t anchor_at = now.monotonic + TC_ANCHOR_LEAD_NS;
    for (int k = 0; k < TC_TRACK_COUNT; k++) {
        int64_t moved = tc_scale(anchor_at - anchors->t0, tc_anchors_track_rate(anchors, k));
        if (anchors->track[k] > TC_INSTANT_MAX - moved) return TC_E_RANGE;
        anchors->track[k] += moved;
    }
    anchors->t0 = anchor_at;

    int result = TC_OK;
    switch (verb->kind) {
    case TC_VERB_FREEZE:
        /* Both tracks stop: the session is frozen as one, whatever stood still before. */
        anchors->rate = 0;
        anchors->wall_frozen = 0;
        result = tc_change_wall(anchors, verb->wall, verb->value);
        break;
    case TC_VERB_FREEZE_WALL:
        anchors->wall_frozen = 1;
        result = tc_change_wall(anchors, verb->wall, verb->value);
        break;
    case TC_VERB_SET_RATE:
    case TC_VERB_RESUME:
        if (verb->rate < TC_RATE_MIN || verb->rate > TC_RATE_MAX) return TC_E_INVALID;
        anchors->rate = verb->rate;
        if (verb->kind == TC_VERB_RESUME) anchors->wall_frozen = 0;
        break;
    case TC_VERB_ADVANCE:
    case TC_VERB_ADVANCE_TO: {
        int64_t step = verb->value;
        if (verb->kind == TC_VERB_ADVANCE_TO) {
            if (!tc_vclock_valid(verb->vclock)) return TC_E_INVALID;
            int64_t now_on_clock = anchors->track[tc_track_of(verb->vclock)] +
                                   tc_split_to_ns(header->clock_offset[verb->vclock]);
            step = verb->value > now_on_clock ? verb->value - now_on_clock : 0;
        }
        if (step < 0) return TC_E_INVALID;
        for (int k = 0; k < TC_TRACK_COUNT; k++) {
            if (anchors->track[k] > TC_INSTANT_MAX - step) return TC_E_RANGE;
            anchors->track[k] += step;
        }
        break;
    }
    case TC_VERB_SET_WALL:
        if (verb->wall == TC_WALL_KEEP) return TC_E_INVALID;
        result = tc_change_wall(anchors, verb->wall, verb->value);
        break;
    case TC_VERB_RESET:
        anchors->rate = TC_RATE_ONE;
        anchors->wall_frozen = 0;
        result = tc_change_wall(anchors, TC_WALL_ABSOLUTE, now.realtime + TC_ANCHOR_LEAD_NS);
        break;
    default: return TC_E_INVALID;
    }
    if (result != TC_OK) return result;
    for (int k = 0; k < TC_TRACK_COUNT; k++)
        if (!tc_instant_in_range(anchors->track[k])) return TC_E_RANGE;
    return TC_OK;
}

/* ---- the reader's form ---- */

#define TC_LOAD(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

/* A frozen track: t0 + offset. */
__attribute__((always_inline)) static inline struct timespec tc_state_at_anchor(const struct tc_clock_state *state,
                                                                              int track) {
    return tc_timespec_normalised(TC_LOAD(state->t0.sec) + TC_LOAD(state->offset[track].sec),
                                  TC_LOAD(state->t0.nsec) + TC_LOAD(state->offset[track].nsec));
}

/* A running track at the real monotonic time `real`, at `rate` (the published rate without its flags). */
__attribute__((always_inline)) static inline struct timespec tc_state_at(const struct tc_clock_state *state, int track,
                                                                       struct timespec real, uint64_t rate) {
    int64_t t0_sec = TC_LOAD(state->t0.sec), t0_nsec = TC_LOAD(state->t0.nsec);
    int64_t offset_sec = TC_LOAD(state->offset[track].sec), offset_nsec = TC_LOAD(state->offset[track].nsec);
    /* Real time runs at rate 1 unless a test says otherwise: then a read is an addition. */
    if (__builtin_expect(rate == TC_RATE_ONE, 1) &&
        __builtin_expect(real.tv_sec > t0_sec || (real.tv_sec == t0_sec && real.tv_nsec >= t0_nsec), 1))
        return tc_timespec_normalised(real.tv_sec + offset_sec, real.tv_nsec + offset_nsec);
    int64_t delta = (real.tv_sec - t0_sec) * TC_NS_PER_SECOND + (real.tv_nsec - t0_nsec);
    int64_t anchor = (t0_sec + offset_sec) * TC_NS_PER_SECOND + t0_nsec + offset_nsec;
    return tc_timespec_from_ns(anchor + tc_scale(delta, rate));
}

/* Adds what a clock adds to its track (nothing for MONOTONIC and REALTIME). */
__attribute__((always_inline)) static inline void tc_add_clock_offset(const struct tc_segment *segment, int vclock,
                                                                    struct timespec *value) {
    if (__builtin_expect(vclock == TC_VCLOCK_MONOTONIC || vclock == TC_VCLOCK_REALTIME, 1)) return;
    const struct tc_split *offset = &segment->header.clock_offset[vclock];
    *value = tc_timespec_normalised(value->tv_sec + offset->sec, value->tv_nsec + offset->nsec);
}

/*
 * One attempt at reading a clock's track from `state`, the copy that the
 * sequence number `seq` selects: 1 (and `*out` written) if seq did not
 * change meanwhile, 0 if it did or the copy holds a pending verb (then the
 * out-of-line path reads).
 *
 * The real clock is read after the sequence load and before the state: if
 * the copy turns out to be one published during the read, the second
 * sequence load differs and the read is retried; otherwise it was
 * published before the first load, so the real time read is past its t0
 * (or within TC_ANCHOR_LEAD_NS before it, where the track reads its anchor).
 * The result is computed into a variable of its own and stored to `*out`
 * only after the second sequence load: the real clock's variable, whose
 * address the vDSO takes, is one the compiler must reload after a fence,
 * and a result kept apart stays in registers to the caller, which then
 * neither loads it back nor waits for the store to be forwarded.
 */
__attribute__((always_inline)) static inline int tc_timeline_try_read(const struct tc_timeline *timeline,
                                                                    const struct tc_clock_state *state, int track,
                                                                    uint32_t seq, struct timespec *out) {
    uint64_t rate = TC_LOAD(state->rate);
    struct timespec value, real;
    if (rate == 0) {
        value = tc_state_at_anchor(state, track);
    } else if (__builtin_expect((rate & (TC_RATE_PENDING | TC_RATE_WALL_FROZEN)) == 0, 1)) {
        tc_real_clock_gettime(CLOCK_MONOTONIC, &real);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        value = tc_state_at(state, track, real, rate);
    } else {
        if (rate & TC_RATE_PENDING) return 0;
        /* The wall stands still; the elapsed track runs at the rate without the flag. */
        if (track == TC_TRACK_WALL) {
            value = tc_state_at_anchor(state, track);
        } else {
            tc_real_clock_gettime(CLOCK_MONOTONIC, &real);
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            value = tc_state_at(state, track, real, rate & ~TC_RATE_WALL_FROZEN);
        }
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (TC_LOAD(timeline->seq) != seq) return 0;
    *out = value;
    return 1;
}


#ifdef __cplusplus
}
#endif

#endif
