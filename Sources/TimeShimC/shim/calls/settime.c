/*
 * Setting the clock (SPEC §2): in an attached process, CLOCK_REALTIME is
 * the session's wall clock, so every way of setting or stepping it moves
 * the session exactly as `timectl set` does — the same verb, applied under
 * the segment's writer lock by tc_segment_apply() — and never the host's.
 * It is the session's clock, so no privilege is needed.
 *
 * Nothing here passes a request to the kernel that could change a host
 * clock or the kernel's NTP state:
 *
 *  - clock_settime: CLOCK_REALTIME sets the session; the other fixed clock
 *    ids and CPU-time clocks go to the kernel, which can set none of them
 *    (EINVAL, or EPERM for CPU-time clocks); clocks the kernel could set
 *    but the session does not own — auxiliary clocks (Linux 6.17) and
 *    descriptor clocks (PTP hardware) — are refused with EPERM; unknown ids
 *    get EINVAL.
 *  - settimeofday and stime set the session; a time zone (the kernel's
 *    sys_tz, whose first setting can warp the host clock) is refused with
 *    EPERM.
 *  - adjtimex, ntp_adjtime and clock_adjtime(CLOCK_REALTIME): a read
 *    (modes 0, ADJ_OFFSET_SS_READ) is the kernel's, with the virtual time in
 *    `time`; ADJ_SETOFFSET steps the session; a slew — ADJ_OFFSET (clamped
 *    to ±0.5 s as the kernel does) or the single-shot adjtime — is applied
 *    to the session as one immediate step, so nothing is left outstanding
 *    (`offset` of an adjtime-style call reads 0); ADJ_NANO and ADJ_MICRO
 *    only give the unit of those values. Every other mode changes the
 *    kernel's NTP state (frequency, status, tick, time constant, error
 *    estimates, TAI offset, the kernel's unit) and is refused with EPERM,
 *    the whole call changing nothing.
 *  - adjtime steps the session by the delta; the outstanding adjustment it
 *    reports is 0.
 *
 * A process whose session was removed still sets the timeline it has
 * mapped (the one it reads): never the host's. Unattached processes get
 * the real calls.
 *
 * Async-signal safety: clock_settime is async-signal-safe in libc. Every
 * signal is blocked from before the writer lock is taken until it is
 * released, so a handler can never find the lock held by its own thread;
 * the lock is a robust mutex taken with trylock. A writer that holds it for
 * more than 10 s (stopped mid-verb) makes the call fail with EAGAIN.
 */
#define _GNU_SOURCE
#include "settime.h"
#include "clock.h"
#include "../runtime/faketime.h"
#include "../runtime/process.h"
#include "../runtime/starvation.h"
#include "../trace/trace_mode.h"
#include "../trace/trace_recording.h"
#include "../trace/trace_replay.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <time.h>

#define SET_LOCK_TIMEOUT_NS (10 * TC_NS_PER_SECOND)
/* The kernel's bound on an ADJ_OFFSET phase offset (MAXPHASE). */
#define MAX_PHASE_NS 500000000LL
/* A descriptor clock id's low bits (CLOCKFD in the kernel). */
#define CLOCKFD_BITS 3
/* Auxiliary clocks, CLOCK_AUX … CLOCK_AUX_LAST (Linux 6.17). */
#define FIRST_AUX_CLOCK 16
#define LAST_AUX_CLOCK 23
/* The modes adjtime() uses (ADJ_ADJTIME and ADJ_OFFSET_READONLY in the kernel). */
#define ADJTIME_MODE 0x8000u
#define ADJTIME_READ_ONLY 0x2000u

/* What a non-session clock id may do here. */
enum foreign_clock {
    FOREIGN_KERNEL = 0,   /* the kernel cannot set it: its answer is safe */
    FOREIGN_HOST = 1,     /* the kernel could set it: a host clock, refused */
    FOREIGN_UNKNOWN = 2,  /* no clock the kernel knows today */
};

static int foreign_clock_kind(clockid_t clock) {
    if (clock < 0) return (clock & 7) == CLOCKFD_BITS ? FOREIGN_HOST : FOREIGN_KERNEL;
    if (clock <= CLOCK_TAI) return FOREIGN_KERNEL;
    if (clock >= FIRST_AUX_CLOCK && clock <= LAST_AUX_CLOCK) return FOREIGN_HOST;
    return FOREIGN_UNKNOWN;
}

static int64_t timespec_ns(int64_t sec, int64_t nsec, int *overflow) {
    int64_t ns;
    if (__builtin_mul_overflow(sec, TC_NS_PER_SECOND, &ns) || __builtin_add_overflow(ns, nsec, &ns)) *overflow = 1;
    return ns;
}

/*
 * Moves the session's wall clock (TC_WALL_ABSOLUTE to `value`, or
 * TC_WALL_RELATIVE by it) through `call`. Returns 0 or a negative errno,
 * as the kernel would.
 */
static long move_session_wall(struct tc_segment *segment, int call, int change, int64_t value) {
    /* On libfaketime's settings the clock the program reads may not be the one its waits run on. */
    segment = tc_faketime_active() ? tc_faketime.clock : segment;
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    long result = 0;
    if (tc_trace_mode == TC_TRACE_REPLAYING) {
        /* The replayed readings already show the change; see tc_trace_replay_wall_set. */
        tc_trace_replay_wall_set(call, segment);
    } else if (tc_segment_lock(segment, SET_LOCK_TIMEOUT_NS, NULL) != TC_OK) {
        result = -EAGAIN;
    } else {
        struct tc_verb verb = {.kind = TC_VERB_SET_WALL, .wall = change, .value = value};
        struct tc_clock_state published;
        int applied = tc_segment_apply(segment, &verb, &published);
        tc_segment_unlock(segment);
        if (applied != TC_OK) {
            result = -EINVAL;   /* outside the session's range, as the kernel's own range check answers */
        } else if (tc_trace_mode == TC_TRACE_RECORDING) {
            struct tc_anchors anchors = tc_anchors_unpack(&published);
            tc_trace_record_wall_set(call, anchors.track[TC_TRACK_WALL]);
        }
    }
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    return result;
}

/* Sets the session's wall clock to a kernel-validated timespec value. */
static long set_session_wall(struct tc_segment *segment, int call, int64_t sec, int64_t nsec) {
    if (sec < 0 || nsec < 0 || nsec >= TC_NS_PER_SECOND) return -EINVAL;
    int overflow = 0;
    int64_t wall = timespec_ns(sec, nsec, &overflow);
    if (overflow) return -EINVAL;
    /* The thread reads the session's wall plus its creep (runtime/starvation.h): it reads `wall` next. */
    return move_session_wall(segment, call, TC_WALL_ABSOLUTE, wall - tc_own_creep());
}

/* ---- clock_settime ---- */

static long session_clock_settime(struct tc_segment *segment, int call, clockid_t clock, const struct timespec *ts) {
    if (clock != CLOCK_REALTIME) {
        switch (foreign_clock_kind(clock)) {
        case FOREIGN_KERNEL: return tc_raw_syscall(SYS_clock_settime, clock, ts);
        case FOREIGN_HOST: return -EPERM;
        default: return -EINVAL;
        }
    }
    if (!ts) return -EFAULT;
    return set_session_wall(segment, call, ts->tv_sec, ts->tv_nsec);
}

static int shim_clock_settime(clockid_t clock, const struct timespec *ts) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment) return (int)tc_shim_errno_result(tc_raw_syscall(SYS_clock_settime, clock, ts));
    return (int)tc_shim_errno_result(session_clock_settime(segment, TC_CALL_CLOCK_SETTIME, clock, ts));
}

TC_EXPORT int clock_settime(clockid_t, const struct timespec *) __attribute__((alias("shim_clock_settime")));

/* ---- settimeofday, stime ---- */

/* The system call's semantics (which the libc function narrows): tv and tz may both be given. */
static long session_settimeofday(struct tc_segment *segment, int call, const struct timeval *tv,
                                 const struct timezone *tz) {
    if (tz) return -EPERM;
    if (!tv) return 0;
    if (tv->tv_usec < 0 || tv->tv_usec >= 1000000) return -EINVAL;
    return set_session_wall(segment, call, tv->tv_sec, (int64_t)tv->tv_usec * 1000);
}

static int shim_settimeofday(const struct timeval *tv, const struct timezone *tz) {
    struct tc_segment *segment = tc_shim_segment();
    /* libc's: a time and a zone at once is EINVAL; a zone alone only sets the zone. */
    if (tv && tz) {
        errno = EINVAL;
        return -1;
    }
    if (!segment) {
        if (tz) return (int)tc_shim_errno_result(tc_raw_syscall(SYS_settimeofday, 0, tz));
        if (!tv) return (int)tc_shim_errno_result(-EFAULT);
        struct timespec ts = {tv->tv_sec, (long)tv->tv_usec * 1000};
        return (int)tc_shim_errno_result(tc_raw_syscall(SYS_clock_settime, CLOCK_REALTIME, &ts));
    }
    if (!tv && !tz) return (int)tc_shim_errno_result(-EFAULT);
    return (int)tc_shim_errno_result(session_settimeofday(segment, TC_CALL_SETTIMEOFDAY, tv, tz));
}

TC_EXPORT int settimeofday(const struct timeval *, const struct timezone *) __attribute__((alias("shim_settimeofday")));

/* Gone from glibc's headers since 2.31, but still exported for programs linked before. */
static int shim_stime(const time_t *when) {
    if (!when) {
        errno = EINVAL;
        return -1;
    }
    struct tc_segment *segment = tc_shim_segment();
    if (!segment) {
        struct timespec ts = {*when, 0};
        return (int)tc_shim_errno_result(tc_raw_syscall(SYS_clock_settime, CLOCK_REALTIME, &ts));
    }
    return (int)tc_shim_errno_result(set_session_wall(segment, TC_CALL_STIME, *when, 0));
}

TC_EXPORT int stime(const time_t *) __attribute__((alias("shim_stime")));

/* ---- adjtimex, ntp_adjtime, clock_adjtime, adjtime ---- */

/* The kernel's read of its NTP state into `tx` (modes untouched), with the session's time in `time`. */
static long read_ntp_state(int call, struct timex *tx) {
    unsigned int modes = tx->modes;
    tx->modes = 0;
    long state = tc_raw_syscall(SYS_adjtimex, tx);
    tx->modes = modes;
    if (state < 0) return state;
    struct timespec now;
    tc_read_session_wall(call, &now);
    tx->time.tv_sec = now.tv_sec;
    tx->time.tv_usec = (tx->status & STA_NANO) ? now.tv_nsec : now.tv_nsec / 1000;
    return state;
}

static long session_adjtimex(struct tc_segment *segment, int call, struct timex *tx) {
    if (!tx) return -EFAULT;
    unsigned int modes = tx->modes;
    int64_t shift = 0;
    int overflow = 0;
    if (modes & ADJTIME_MODE) {
        /* adjtime(): a single-shot slew, or (ADJ_OFFSET_SS_READ) a read of what is outstanding. */
        if (!(modes & ADJTIME_READ_ONLY)) {
            if (tx->offset > INT64_MAX / 1000 || tx->offset < INT64_MIN / 1000) return -EINVAL;
            shift = (int64_t)tx->offset * 1000;
        }
        if (shift != 0) {
            long moved = move_session_wall(segment, call, TC_WALL_RELATIVE, shift);
            if (moved < 0) return moved;
        }
        long state = read_ntp_state(call, tx);
        if (state >= 0) tx->offset = 0;   /* the session never has a slew outstanding */
        return state;
    }
    if (modes == 0) return read_ntp_state(call, tx);
    const unsigned int stepping = ADJ_SETOFFSET | ADJ_OFFSET, units = ADJ_NANO | ADJ_MICRO;
    if ((modes & ~(stepping | units)) || !(modes & stepping)) return -EPERM;
    if (modes & ADJ_SETOFFSET) {
        int nano = (modes & ADJ_NANO) != 0;
        if (tx->time.tv_usec < 0 || tx->time.tv_usec >= (nano ? TC_NS_PER_SECOND : 1000000)) return -EINVAL;
        shift = timespec_ns(tx->time.tv_sec, nano ? tx->time.tv_usec : (int64_t)tx->time.tv_usec * 1000, &overflow);
    }
    if (modes & ADJ_OFFSET) {
        int nano;
        if (modes & units) {
            nano = (modes & units) == ADJ_NANO;
        } else {
            struct timex state = {0};
            long read = tc_raw_syscall(SYS_adjtimex, &state);
            if (read < 0) return read;
            nano = (state.status & STA_NANO) != 0;
        }
        int64_t phase = nano ? tx->offset : (tx->offset > INT64_MAX / 1000 ? INT64_MAX
                                               : tx->offset < INT64_MIN / 1000 ? INT64_MIN : (int64_t)tx->offset * 1000);
        phase = phase > MAX_PHASE_NS ? MAX_PHASE_NS : phase < -MAX_PHASE_NS ? -MAX_PHASE_NS : phase;
        if (__builtin_add_overflow(shift, phase, &shift)) overflow = 1;
    }
    if (overflow) return -EINVAL;
    long moved = move_session_wall(segment, call, TC_WALL_RELATIVE, shift);
    if (moved < 0) return moved;
    return read_ntp_state(call, tx);
}

static int shim_adjtimex(struct timex *tx) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment) return (int)tc_shim_errno_result(tc_raw_syscall(SYS_adjtimex, tx));
    return (int)tc_shim_errno_result(session_adjtimex(segment, TC_CALL_ADJTIMEX, tx));
}

TC_EXPORT int adjtimex(struct timex *) __attribute__((alias("shim_adjtimex")));
TC_EXPORT int __adjtimex(struct timex *) __attribute__((alias("shim_adjtimex")));
TC_EXPORT int ntp_adjtime(struct timex *) __attribute__((alias("shim_adjtimex")));

static long session_clock_adjtime(struct tc_segment *segment, int call, clockid_t clock, struct timex *tx) {
    if (clock == CLOCK_REALTIME) return session_adjtimex(segment, call, tx);
    switch (foreign_clock_kind(clock)) {
    case FOREIGN_KERNEL: return tc_raw_syscall(SYS_clock_adjtime, clock, tx);
    case FOREIGN_HOST:
        /* Reading a host clock's state changes nothing. */
        if (tx && tx->modes == 0) return tc_raw_syscall(SYS_clock_adjtime, clock, tx);
        return -EPERM;
    default: return -EINVAL;
    }
}

static int shim_clock_adjtime(clockid_t clock, struct timex *tx) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment) return (int)tc_shim_errno_result(tc_raw_syscall(SYS_clock_adjtime, clock, tx));
    return (int)tc_shim_errno_result(session_clock_adjtime(segment, TC_CALL_CLOCK_ADJTIME, clock, tx));
}

TC_EXPORT int clock_adjtime(clockid_t, struct timex *) __attribute__((alias("shim_clock_adjtime")));

/* libc's adjtime: the delta in whole microseconds, through an adjtime-style adjtimex. */
static int shim_adjtime(const struct timeval *delta, struct timeval *olddelta) {
    struct timex tx = {0};
    if (delta) {
        const long max_sec = LONG_MAX / 1000000L - 2, min_sec = LONG_MIN / 1000000L + 2;
        long sec = delta->tv_sec + delta->tv_usec / 1000000L, usec = delta->tv_usec % 1000000L;
        if (sec > max_sec || sec < min_sec) {
            errno = EINVAL;
            return -1;
        }
        tx.offset = usec + sec * 1000000L;
        tx.modes = ADJ_OFFSET_SINGLESHOT;
    } else {
        tx.modes = ADJ_OFFSET_SS_READ;
    }
    struct tc_segment *segment = tc_shim_segment();
    long state = segment ? session_adjtimex(segment, TC_CALL_ADJTIME, &tx) : tc_raw_syscall(SYS_adjtimex, &tx);
    if (tc_shim_errno_result(state) < 0) return -1;
    if (olddelta) {
        olddelta->tv_sec = tx.offset / 1000000L;
        olddelta->tv_usec = tx.offset % 1000000L;
    }
    return 0;
}

TC_EXPORT int adjtime(const struct timeval *, struct timeval *) __attribute__((alias("shim_adjtime")));

/* ---- syscall(2) ---- */

/* syscall(SYS_clock_settime | SYS_settimeofday | SYS_adjtimex | SYS_clock_adjtime, …) in an attached process: the kernel's result form. */
long tc_syscall_settime(struct tc_segment *segment, long number, long a1, long a2) {
    switch (number) {
    case SYS_clock_settime:
        return session_clock_settime(segment, TC_CALL_SYSCALL, (clockid_t)a1, (const struct timespec *)a2);
    case SYS_settimeofday:
        return session_settimeofday(segment, TC_CALL_SYSCALL, (const struct timeval *)a1, (const struct timezone *)a2);
    case SYS_adjtimex: return session_adjtimex(segment, TC_CALL_SYSCALL, (struct timex *)a1);
    case SYS_clock_adjtime: return session_clock_adjtime(segment, TC_CALL_SYSCALL, (clockid_t)a1, (struct timex *)a2);
    default: return -ENOSYS;
    }
}
