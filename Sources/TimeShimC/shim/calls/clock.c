/*
 * Clock reads: every libc entry point that returns the time (SPEC §2).
 *
 * Attached, a read is tc_segment_read(): a sequence check, a few loads and,
 * unless the session is frozen, one vDSO read of the real monotonic clock.
 * Unattached, or for clocks the session does not replace (CPU-time clocks),
 * the call goes straight to the vDSO, as libc's own would. While the
 * process records or replays (trace/trace_mode.h), reads leave this path for
 * tc_trace_read(), so that plain reads pay nothing for it.
 *
 * Each entry point is a static function exported under libc's names by an
 * alias: libc's headers declare some arguments nonnull, which would let the
 * compiler drop the NULL checks the real functions honour.
 */
#define _GNU_SOURCE
#include "clock.h"
#include "../runtime/faketime.h"
#include "../runtime/process.h"
#include "../runtime/starvation.h"
#include "../trace/trace_mode.h"
#include "../trace/trace_recording.h"
#include "../trace/trace_replay.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timeb.h>
#include <sys/timex.h>
#include <time.h>

static int real_clock_gettime(clockid_t clock, struct timespec *ts) {
    return (int)tc_shim_errno_result(tc_real_clock_gettime(clock, ts));
}

/* The session's reading as the calling thread sees it: its creep ahead (runtime/starvation.h). */
__attribute__((always_inline)) static inline void own_clock(struct timespec *value) {
    const struct tc_spin_state *state = &tc_spin_state;
    if (__builtin_expect(state->creep != 0, 0))
        *value = tc_timespec_normalised(value->tv_sec + state->creep_seconds, value->tv_nsec + state->creep_nanoseconds);
}

/* Reads not on the plain attached path: initialisation, recording, replay, libfaketime's per-call settings, real time. */
__attribute__((noinline)) static int virtual_time_otherwise(int call, clockid_t clock, int vclock, struct timespec *value) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment) return 0;
    if (tc_faketime_active()) return tc_faketime_read(vclock, value);
    tc_segment_read_into(segment, vclock, value);
    if (tc_trace_mode == TC_TRACE_RECORDING) {
        int64_t creep = tc_own_creep();
        if (creep != 0) tc_creep_apply(creep, value);
        tc_spin_note_reading(vclock, value);
        tc_trace_record_reading(call, clock, vclock, value);
    }
    else if (tc_trace_mode == TC_TRACE_REPLAYING) tc_trace_replay_reading(call, clock, vclock, segment, value);
    return 1;
}

/* The plain attached read when a verb landed or is pending meanwhile (or the clock stopped since it was checked). */
__attribute__((noinline)) static int virtual_time_contended(struct tc_segment *segment, int vclock, struct timespec *value) {
    tc_segment_read_contended(segment, vclock, value);
    own_clock(value);
    tc_spin_note_reading(vclock, value);
    return 1;
}

/*
 * The plain attached read of a clock that runs: out of line, so that only it
 * saves the registers its real-clock read needs, never the read of a clock
 * that stands still before it; and the real clock first, so that they are
 * few (tc_segment_try_read_running). A running clock cannot be spun on, so
 * its readings are not noted (runtime/starvation.h). Returns 0,
 * clock_gettime's success, so that callers jump to it.
 */
__attribute__((noinline)) static int read_running_clock(struct tc_segment *segment, int vclock, struct timespec *value) {
    struct timespec real;
    tc_real_clock_gettime(CLOCK_MONOTONIC, &real);
    if (TC_LIKELY(tc_segment_try_read_running(segment, vclock, real, value))) own_clock(value);
    else virtual_time_contended(segment, vclock, value);
    return 0;
}

enum { READ_RUNS, READ_DONE, READ_UNUSUAL };

/* The read of a clock that stands still, noted for the spin check: READ_DONE; READ_UNUSUAL when the caller must
   still hand it to tc_spin_note_unusual (a thread that crept: runtime/starvation.h); READ_RUNS when the clock runs. */
__attribute__((always_inline)) static inline int read_still_clock(struct tc_segment *segment, int vclock,
                                                                 struct timespec *value) {
    struct timespec reading;
    if (!tc_segment_try_read_still(segment, vclock, &reading)) return READ_RUNS;
    /* Stored first, the reading need not outlive the spin check: no register is saved for it. */
    *value = reading;
    return tc_spin_note_still(vclock, &reading, value) ? READ_UNUSUAL : READ_DONE;
}

/* The plain attached read: 1 with the session's value in `*value`, or 0 (unattached, recording, replaying). */
__attribute__((always_inline)) static inline int virtual_time_attached(int vclock, struct timespec *value) {
    struct tc_segment *segment = __atomic_load_n(&tc_shim_read_segment, __ATOMIC_ACQUIRE);
    if (!TC_LIKELY(segment != NULL)) return 0;
    int read = read_still_clock(segment, vclock, value);
    if (read == READ_RUNS) read_running_clock(segment, vclock, value);
    else if (read == READ_UNUSUAL) tc_spin_note_unusual(vclock, value);
    return 1;
}

/* Writes the session's value for `clock` (through `call`, an enum tc_call), or returns 0 when the real clock answers. */
__attribute__((always_inline)) static inline int virtual_time(int call, clockid_t clock, struct timespec *value) {
    int vclock = tc_vclock_for_clockid(clock);
    if (vclock < 0) return 0;
    if (TC_LIKELY(virtual_time_attached(vclock, value))) return 1;
    if (__atomic_load_n(&tc_shim_state, __ATOMIC_ACQUIRE) == TC_SHIM_REAL) return 0;
    return virtual_time_otherwise(call, clock, vclock, value);
}

static int read_clock(int call, clockid_t clock, struct timespec *ts) {
    if (!virtual_time(call, clock, ts)) return real_clock_gettime(clock, ts);
    return 0;
}

/* The hottest entry point: a still clock's read returns with no register saved, a running one's jumps to its reader. */
static int shim_clock_gettime(clockid_t clock, struct timespec *ts) {
    int vclock = tc_vclock_for_clockid(clock);
    struct tc_segment *segment = __atomic_load_n(&tc_shim_read_segment, __ATOMIC_ACQUIRE);
    if (TC_LIKELY(vclock >= 0 && segment != NULL)) {
        int read = read_still_clock(segment, vclock, ts);
        if (TC_LIKELY(read == READ_DONE)) return 0;
        if (read == READ_UNUSUAL) return tc_spin_note_unusual(vclock, ts);
        return read_running_clock(segment, vclock, ts);
    }
    return read_clock(TC_CALL_CLOCK_GETTIME, clock, ts);
}

TC_EXPORT int clock_gettime(clockid_t, struct timespec *) __attribute__((alias("shim_clock_gettime")));
TC_EXPORT int __clock_gettime(clockid_t, struct timespec *) __attribute__((alias("shim_clock_gettime")));

static int shim_gettimeofday(struct timeval *tv, void *tz) {
    struct timespec ts;
    if (!virtual_time(TC_CALL_GETTIMEOFDAY, CLOCK_REALTIME, &ts))
        return (int)tc_shim_errno_result(__atomic_load_n(&tc_vdso_gettimeofday, __ATOMIC_RELAXED)(tv, tz));
    if (tz) __atomic_load_n(&tc_vdso_gettimeofday, __ATOMIC_RELAXED)(NULL, tz);
    if (tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return 0;
}

TC_EXPORT int gettimeofday(struct timeval *restrict, void *restrict) __attribute__((alias("shim_gettimeofday")));
TC_EXPORT int __gettimeofday(struct timeval *restrict, void *restrict) __attribute__((alias("shim_gettimeofday")));

static time_t shim_time(time_t *out) {
    struct timespec ts;
    if (!virtual_time(TC_CALL_TIME, CLOCK_REALTIME, &ts)) return __atomic_load_n(&tc_vdso_time, __ATOMIC_RELAXED)(out);
    time_t seconds = ts.tv_sec;
    if (out) *out = seconds;
    return seconds;
}

TC_EXPORT time_t time(time_t *) __attribute__((alias("shim_time")));

static int shim_timespec_get(struct timespec *ts, int base) {
    if (base != TIME_UTC) return 0;
    return read_clock(TC_CALL_TIMESPEC_GET, CLOCK_REALTIME, ts) == 0 ? base : 0;
}

TC_EXPORT int timespec_get(struct timespec *, int) __attribute__((alias("shim_timespec_get")));

static int shim_ftime(struct timeb *tb) {
    struct timespec ts;
    read_clock(TC_CALL_FTIME, CLOCK_REALTIME, &ts);
    tb->time = ts.tv_sec;
    tb->millitm = (unsigned short)(ts.tv_nsec / 1000000);
    tb->timezone = 0;
    tb->dstflag = 0;
    return 0;
}

TC_EXPORT int ftime(struct timeb *) __attribute__((alias("shim_ftime")));

/* glibc's NTP reads; musl has no ntp_gettime. */
#ifdef __GLIBC__

/* ntp_gettime reports the kernel's NTP state with the current time; only the time is virtual. */
static int ntp_read(struct timex *tx, struct timeval *time_out) {
    memset(tx, 0, sizeof(*tx));
    long state = tc_shim_errno_result(tc_raw_syscall(SYS_adjtimex, tx));
    struct timespec ts;
    if (state >= 0 && virtual_time(TC_CALL_NTP_GETTIME, CLOCK_REALTIME, &ts)) {
        time_out->tv_sec = ts.tv_sec;
        time_out->tv_usec = (tx->status & STA_NANO) ? ts.tv_nsec : ts.tv_nsec / 1000;
    } else {
        *time_out = tx->time;
    }
    return (int)state;
}

static int shim_ntp_gettimex(struct ntptimeval *ntv) {
    struct timex tx;
    int state = ntp_read(&tx, &ntv->time);
    ntv->maxerror = tx.maxerror;
    ntv->esterror = tx.esterror;
    ntv->tai = tx.tai;
    return state;
}

TC_EXPORT int ntp_gettimex(struct ntptimeval *) __attribute__((alias("shim_ntp_gettimex")));

/* The pre-2.12 ABI: glibc's headers now redirect ntp_gettime to ntp_gettimex. */
struct ntptimeval_v1 {
    struct timeval time;
    long maxerror;
    long esterror;
};

TC_EXPORT int legacy_ntp_gettime(struct ntptimeval_v1 *ntv) __asm__("ntp_gettime");
int legacy_ntp_gettime(struct ntptimeval_v1 *ntv) {
    struct timex tx;
    int state = ntp_read(&tx, &ntv->time);
    ntv->maxerror = tx.maxerror;
    ntv->esterror = tx.esterror;
    return state;
}

#endif

/* The session's wall clock, read (and recorded or replayed) like any reading through `call`: adjtimex's `time`. */
void tc_read_session_wall(int call, struct timespec *value) {
    if (!virtual_time(call, CLOCK_REALTIME, value)) real_clock_gettime(CLOCK_REALTIME, value);
}

/* syscall(SYS_clock_gettime / SYS_gettimeofday / SYS_time, …), from the system-call table. */
long tc_clock_syscall(long number, long a1, long a2) {
    struct timespec value;
    switch (number) {
    case SYS_clock_gettime:
        if (!virtual_time(TC_CALL_SYSCALL, (clockid_t)a1, &value)) break;
        if (!a2) return -EFAULT;
        *(struct timespec *)a2 = value;
        return 0;
#ifdef SYS_gettimeofday
    case SYS_gettimeofday: {
        int saved_errno = errno;
        long result = shim_gettimeofday((struct timeval *)a1, (void *)a2) == 0 ? 0 : -errno;
        errno = saved_errno;
        return result;
    }
#endif
#ifdef SYS_time
    case SYS_time: return shim_time((time_t *)a1);
#endif
    default: break;
    }
    return tc_raw_syscall(number, a1, a2);
}

/*
 * The same reads with the vDSO's conventions — 0 or −errno, errno untouched —
 * for programs that call the vDSO themselves (Go): vdso_redirect.c points
 * the vDSO's symbols here. They run on whatever stack the caller has (Go's
 * small system stack, signal handlers), so they stay as small as the reads above.
 */
/*
 * A Go program's clocks are its process's (runtime/starvation.h): its
 * goroutines move between threads, so a reading through these adds the
 * process's creep, and a spin noted here moves it. Recording and replay
 * answer per process too (trace_dispatch), off this path.
 */
__attribute__((always_inline)) static inline int process_time(int call, clockid_t clock, struct timespec *value) {
    int vclock = tc_vclock_for_clockid(clock);
    if (vclock < 0) return 0;
    struct tc_segment *segment = __atomic_load_n(&tc_shim_read_segment, __ATOMIC_ACQUIRE);
    if (!TC_LIKELY(segment != NULL)) {
        if (__atomic_load_n(&tc_shim_state, __ATOMIC_ACQUIRE) == TC_SHIM_REAL) return 0;
        return virtual_time_otherwise(call, clock, vclock, value);
    }
    int still = tc_segment_try_read_still(segment, vclock, value);
    if (!still) tc_segment_read_into(segment, vclock, value);
    int64_t creep = __atomic_load_n(&tc_process_creep, __ATOMIC_RELAXED);
    if (creep != 0) tc_creep_apply(creep, value);
    if (still) tc_spin_note_reading(vclock, value);
    return 1;
}

int tc_vdso_entry_clock_gettime(clockid_t clock, struct timespec *ts) {
    if (process_time(TC_CALL_CLOCK_GETTIME, clock, ts)) return 0;
    return tc_real_clock_gettime(clock, ts);
}

int tc_vdso_entry_gettimeofday(struct timeval *tv, void *tz) {
    struct timespec ts;
    if (!process_time(TC_CALL_GETTIMEOFDAY, CLOCK_REALTIME, &ts))
        return __atomic_load_n(&tc_vdso_gettimeofday, __ATOMIC_RELAXED)(tv, tz);
    if (tz) __atomic_load_n(&tc_vdso_gettimeofday, __ATOMIC_RELAXED)(NULL, tz);
    if (tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return 0;
}

time_t tc_vdso_entry_time(time_t *out) {
    struct timespec ts;
    if (!process_time(TC_CALL_TIME, CLOCK_REALTIME, &ts)) return __atomic_load_n(&tc_vdso_time, __ATOMIC_RELAXED)(out);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}

/*
 * The same for a static program run by the loader (attach/static_takeover.c): its
 * threads' FS is the program's own, not a TCB of the shim's libc, so these
 * touch no thread-local state — no spin detection (runtime/starvation.c);
 * they add the process's creep, which a Go runtime's back-offs move. The
 * segment is published before the program runs. Recording and replay keep
 * a static program's per-thread state in slots keyed by thread id instead
 * (trace_registry.h), off this path.
 */
__attribute__((noinline)) static int traced_time_without_tls(int call, clockid_t clock, int vclock, struct timespec *value) {
    struct tc_segment *segment = __atomic_load_n(&tc_shim_attached_segment, __ATOMIC_ACQUIRE);
    if (segment && tc_faketime_active()) return tc_faketime_read(vclock, value);
    if (!segment || tc_trace_mode == TC_TRACE_OFF) return 0;
    tc_segment_read_into(segment, vclock, value);
    if (tc_trace_mode == TC_TRACE_RECORDING) tc_trace_record_reading(call, clock, vclock, value);
    else tc_trace_replay_reading(call, clock, vclock, segment, value);
    return 1;
}

__attribute__((always_inline)) static inline int virtual_time_without_tls(int call, clockid_t clock, struct timespec *value) {
    int vclock = tc_vclock_for_clockid(clock);
    if (vclock < 0) return 0;
    struct tc_segment *segment = __atomic_load_n(&tc_shim_read_segment, __ATOMIC_ACQUIRE);
    if (TC_LIKELY(segment != NULL)) {
        tc_segment_read_into(segment, vclock, value);
        int64_t creep = __atomic_load_n(&tc_process_creep, __ATOMIC_RELAXED);
        if (creep != 0) tc_creep_apply(creep, value);
        return 1;
    }
    return traced_time_without_tls(call, clock, vclock, value);
}

int tc_vdso_static_entry_clock_gettime(clockid_t clock, struct timespec *ts) {
    if (virtual_time_without_tls(TC_CALL_CLOCK_GETTIME, clock, ts)) return 0;
    return tc_real_clock_gettime(clock, ts);
}

int tc_vdso_static_entry_gettimeofday(struct timeval *tv, void *tz) {
    struct timespec ts;
    if (!virtual_time_without_tls(TC_CALL_GETTIMEOFDAY, CLOCK_REALTIME, &ts)) return __atomic_load_n(&tc_vdso_gettimeofday, __ATOMIC_RELAXED)(tv, tz);
    if (tz) __atomic_load_n(&tc_vdso_gettimeofday, __ATOMIC_RELAXED)(NULL, tz);
    if (tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return 0;
}

time_t tc_vdso_static_entry_time(time_t *out) {
    struct timespec ts;
    if (!virtual_time_without_tls(TC_CALL_TIME, CLOCK_REALTIME, &ts)) return __atomic_load_n(&tc_vdso_time, __ATOMIC_RELAXED)(out);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
