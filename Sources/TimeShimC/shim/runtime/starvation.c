/*
 * The starvation policy (docs/starvation.md, SPEC §3 "No real runtime
 * starves").
 *
 * Spinning: programs written for a clock that always creeps forward wait
 * for it to move — libuuid allows eleven ids per gettimeofday value and
 * then re-reads it; Ruby's sleep polls with a zero timeout until now > end.
 * On a frozen session the value never moves, and they spin for ever. So a
 * thread that reads one value of one clock TC_SPIN_READS times within
 * TC_SPIN_WINDOW_NS of real time, or makes TC_SPIN_WAITS futile waits in a
 * row each after reading it, moves the session forward by TC_CREEP_NS with
 * an ordinary tick in the segment:
 * every process sees it at the same instant (invariant 3), monotonic
 * clocks only go forward, and no wait ends before its deadline. Only a
 * clock that stands still creeps — a frozen session's, or a wall clock
 * under `freeze --wall` (libuuid spins on it just the same) — and only
 * while nobody else is changing the session (the writer lock is tried,
 * never waited for).
 *
 * Yielding: HotSpot brings threads to a safepoint with 10 µs sleeps, sleeps
 * 1 ms on its way out and, if a compiler thread is still busy then, waits
 * for it on a condition variable 10 ms at a time; on a frozen clock with
 * nothing to advance it those waits never end, and the JVM hangs before or
 * after main. So on a frozen session that has no scheduler, a relative
 * sleep or a condition wait with at most TC_YIELD_WAIT_NS to go waits that
 * long in real time and returns as if timed out (a condition signalled
 * meanwhile still wins), time not having moved: the one bounded exception
 * to "a wait never ends before its deadline". With a scheduler, such a
 * wait is an ordinary virtual wait the scheduler steps to.
 *
 * Go's back-offs: a Go program's runtime waits up to 10 ms at a time on
 * real time (trap/syscall_trap.c) and then compares nanotime() with a deadline;
 * one such futex wait that times out beside a running thread is a spin
 * (tc_runtime_backoff_futex, below).
 */
#define _GNU_SOURCE
#include "starvation.h"
#include "process.h"

#include <errno.h>
#include <sys/syscall.h>

TC_TLS struct tc_spin_state tc_spin_state;

static int frozen(const struct tc_segment *segment) { return tc_segment_rate(segment) == 0; }

/* The clock a thread spins on stands still: the session is frozen, or it is a wall clock under freeze --wall. */
static int stands_still(const struct tc_segment *segment, int vclock) { return tc_segment_clock_rate(segment, vclock) == 0; }

/* Moves a session whose clock `vclock` stands still forward by TC_CREEP_NS, unless that clock has moved from
   `seen` (a verb or another creep got there first). */
static void creep_from(struct tc_segment *segment, int vclock, const struct timespec *seen) {
    if (!stands_still(segment, vclock) || tc_segment_try_lock(segment) != TC_OK) return;
    struct timespec now;
    tc_segment_read_into(segment, vclock, &now);
    if (now.tv_sec == seen->tv_sec && now.tv_nsec == seen->tv_nsec && stands_still(segment, vclock)) {
        int saved_errno = errno;
        struct tc_verb advance = {.kind = TC_VERB_ADVANCE, .value = TC_CREEP_NS};
        tc_segment_apply(segment, &advance, NULL);
        errno = saved_errno;
    }
    tc_segment_unlock(segment);
}

/* The same from the thread's last reading. */
static void creep(struct tc_segment *segment) {
    struct tc_spin_state *state = &tc_spin_state;
    struct timespec seen = {.tv_sec = state->seconds, .tv_nsec = state->nanoseconds};
    creep_from(segment, state->vclock, &seen);
}

/* TC_SPIN_READS readings of one value: a spin if they came within TC_SPIN_WINDOW_NS (a program that only reads
   the clock often, as the JVM does while it starts, reads it far more slowly than a loop that waits on it). */
__attribute__((noinline)) void tc_spin_check_window(struct tc_segment *segment) {
    struct tc_spin_state *state = &tc_spin_state;
    int64_t now = tc_real_ns(CLOCK_MONOTONIC);
    int spinning = state->window_start != 0 && now - state->window_start < TC_SPIN_WINDOW_NS;
    state->window_start = now;
    state->repeats = 0;
    if (spinning) creep(segment);
}

void tc_spin_note_futile_wait(struct tc_segment *segment) {
    struct tc_spin_state *state = &tc_spin_state;
    if (!state->read_since_wait) return;  /* polling descriptors, not waiting on the clock */
    state->read_since_wait = 0;
    if (++state->futile_waits < TC_SPIN_WAITS) return;
    state->futile_waits = 0;
    creep(segment);
}

static int has_scheduler(const struct tc_segment *segment) {
    int32_t pid = __atomic_load_n(&segment->scheduler_pid, __ATOMIC_ACQUIRE);
    return pid != 0 && tc_raw_syscall(SYS_kill, pid, 0) != -ESRCH;
}

int tc_wait_yields(const struct tc_segment *segment, int64_t length) {
    return length > 0 && length <= TC_YIELD_WAIT_NS && frozen(segment) && !has_scheduler(segment);
}

int tc_short_sleep_yield(struct tc_segment *segment, int64_t length) {
    if (!tc_wait_yields(segment, length)) return -1;
    struct timespec real = {0, (long)length};
    int interrupted = tc_raw_syscall(SYS_nanosleep, &real, NULL) == -EINTR;
    tc_spin_note_futile_wait(segment);
    return interrupted ? EINTR : 0;
}

/*
 * Go's runtime waits for the other Ps to stop (stopTheWorldWithSema) or to
 * pass a safe point (forEachP) with notetsleep(note, 100 µs): a relative
 * FUTEX_WAIT, then, while the note is not woken, nanotime() against its
 * deadline and another FUTEX_WAIT for what is left; only once that returns
 * does it ask the goroutines that still run to stop again (preemptall). The
 * wait is a runtime back-off and runs on real time (trap/syscall_trap.c), but on
 * a standing monotonic clock the deadline is never reached: a goroutine that
 * missed the first request (the background sweeper, spinning until the
 * collection that waits releases it) is never asked again, and both spin for
 * ever. So a back-off that times out while the session's monotonic clock
 * stands still, and while the process's other threads were on a CPU for at
 * least a quarter of its length (TC_BACKOFF_OTHERS_RAN), is a spin: the
 * session creeps TC_CREEP_NS.
 * Sysmon's nap until the next timer, the runtime's other such wait, begins
 * with every P idle: nothing runs beside it and it moves nothing, unless a
 * goroutine woken meanwhile computes without a system call (which would
 * wake sysmon) — docs/starvation.md says so.
 */
long tc_runtime_backoff_futex(long word, long op, long expected, long timeout) {
    struct tc_segment *segment = tc_shim_segment();
    if (!segment || !stands_still(segment, TC_VCLOCK_MONOTONIC))
        return tc_raw_syscall(SYS_futex, word, op, expected, timeout, 0, 0);
    const struct timespec *length = (const struct timespec *)timeout;
    struct timespec seen;
    tc_segment_read_into(segment, TC_VCLOCK_MONOTONIC, &seen);
    int64_t process = tc_real_ns(CLOCK_PROCESS_CPUTIME_ID), thread = tc_real_ns(CLOCK_THREAD_CPUTIME_ID);
    long result = tc_raw_syscall(SYS_futex, word, op, expected, timeout, 0, 0);
    if (result != -ETIMEDOUT) return result;
    thread = tc_real_ns(CLOCK_THREAD_CPUTIME_ID) - thread;
    process = tc_real_ns(CLOCK_PROCESS_CPUTIME_ID) - process;
    /* The back-off's own length, not the real time it took: on a loaded machine a 100 µs wait can take
       milliseconds, the running goroutine getting no more of them than the waiter. */
    if ((process - thread) * TC_BACKOFF_OTHERS_RAN >= tc_timespec_ns(*length))
        creep_from(segment, TC_VCLOCK_MONOTONIC, &seen);
    return result;
}
